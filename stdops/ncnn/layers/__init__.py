"""ncnn layer declarations, one module per family (registered when imported)."""

from . import (
    activation,
    arith,
    attention,
    conv,
    core,
    dense,
    detection,
    norm,
    pool,
    quant,
    reduce,
    resample,
    rnn,
    shape,
    spectral,
)

__all__ = [
    "activation",
    "arith",
    "attention",
    "conv",
    "core",
    "dense",
    "detection",
    "norm",
    "pool",
    "quant",
    "reduce",
    "resample",
    "rnn",
    "shape",
    "spectral",
]
