"""The operator library: pure NumPy kernels, no file-format knowledge.

Importing this package registers every kernel (explicitly, module by module) in
``stdops.ops._registry.OPS``.
"""

# Explicit registration: each family module registers its kernels when imported.
# Families of the NN issue (conv, pooling, normalization, recurrent, resize, quantization, ...)
# Operators outside the MDF list that the ONNX node suite exercises (newest opsets, ai.onnx.ml,
# ai.onnx.preview.training, ai.onnx.preview)
# The MDF standard functions that are not ONNX operators
from . import (  # noqa: F401,E402  # noqa: F401,E402  # noqa: F401,E402  # noqa: F401,E402
    activation,
    attention,
    cast,
    cognitive,
    conv,
    detection,
    elementwise,
    image,
    indexing,
    linalg,
    loss,
    mdf_standard,
    ml,
    norm,
    pool,
    preview,
    quant,
    random,
    recent,
    reduce,
    resize,
    rnn,
    sequence,
    shape,
    signal,
    text,
    training,
)
from ._registry import OPS, REQUIRED, OpDef, op  # noqa: F401
