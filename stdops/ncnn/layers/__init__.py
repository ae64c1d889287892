"""ncnn layer declarations, one module per family (registered when imported)."""
from . import activation, attention, core, detection, norm, rnn, spectral  # noqa: F401
