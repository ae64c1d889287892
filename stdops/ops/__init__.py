"""The operator library: pure NumPy kernels, no file-format knowledge.

Importing this package registers every kernel (explicitly, module by module) in
``stdops.ops._registry.OPS``.
"""
from ._registry import OPS, REQUIRED, OpDef, op  # noqa: F401

# Explicit registration: each family module registers its kernels when imported.
from . import (  # noqa: F401,E402
    activation,
    cast,
    elementwise,
    indexing,
    linalg,
    reduce,
    shape,
)

# Families of the NN issue (conv, pooling, normalization, recurrent, resize, quantization, ...)
from . import (  # noqa: F401,E402
    conv,
    pool,
    norm,
    rnn,
    resize,
    quant,
    detection,
    random,
    sequence,
    text,
    loss,
    signal,
    attention,
)

# Operators outside the MDF list that the ONNX node suite exercises (newest opsets, ai.onnx.ml,
# ai.onnx.preview.training, ai.onnx.preview)
from . import image, ml, preview, recent, training  # noqa: F401,E402

# The MDF standard functions that are not ONNX operators
from . import cognitive, mdf_standard  # noqa: F401,E402
