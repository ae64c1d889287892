"""ncnn layer declarations, one module per family (registered when imported)."""
from . import activation, core  # noqa: F401
