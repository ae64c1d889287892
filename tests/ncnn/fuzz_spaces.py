"""Every layer's param space for the fuzzer (fuzz_engine.py), gathered from the family modules."""

from __future__ import annotations

from .fuzz_spaces_conv import CONV_SPACES
from .fuzz_spaces_dense import SPACES as DENSE_SPACES
from .fuzz_spaces_elementwise import SPACES as ELEMENTWISE_SPACES
from .fuzz_spaces_misc import SPACES as MISC_SPACES
from .fuzz_spaces_norm_pool import SPACES as NORM_POOL_SPACES
from .fuzz_spaces_shape import SPACES as SHAPE_SPACES

SPACES = {**CONV_SPACES, **ELEMENTWISE_SPACES, **SHAPE_SPACES, **NORM_POOL_SPACES, **DENSE_SPACES, **MISC_SPACES}
