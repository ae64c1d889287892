"""ncnn layer declarations, one module per family (registered when imported)."""
from . import activation, arith, attention, core, detection, norm, reduce, rnn, spectral  # noqa: F401
