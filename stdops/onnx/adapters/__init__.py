"""ONNX version adapters, one module per kernel family (registered when imported)."""

from . import (  # noqa: F401
    activation,
    attention,
    cast,
    elementwise,
    indexing,
    linalg,
    ml,
    norm,
    pool,
    preview,
    quant,
    random,
    reduce,
    resize,
    rnn,
    sequence,
    shape,
    signal,
)
