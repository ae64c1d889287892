"""The operator library: pure NumPy kernels, no file-format knowledge.

Importing this package registers every kernel in ``stdops.ops._registry.OPS``. Registration is
explicit: every kernel module is listed here (one family each) and no module imports another to
register it; tests/test_imports.py walks the imports and refuses a cycle.
"""

from . import (  # noqa: F401  (importing a module registers its kernels)
    activation,  # Relu family, sigmoids, GELU/Mish/Swish/SwiGLU, Softmax family
    attention,  # Attention, RotaryEmbedding, LinearAttention
    cast,  # Cast, CastLike, BitCast
    cognitive,  # MDF: ACT-R, drift diffusion
    conv,  # Conv
    conv_causal,  # CausalConvWithState
    conv_transpose,  # ConvTranspose, Col2Im, DeformConv
    detection,  # NonMaxSuppression
    elementwise,  # arithmetic and unary math
    fused,  # the optimizer's fused steps: Conv / MatMul + bias + activation + residual
    fused_blocks,  # the optimizer's fused steps over two or three convolutions: 1x1 expansion + depthwise [+ 1x1]
    grid_sample,  # GridSample, AffineGrid
    image,  # ImageDecoder
    indexing,  # gathers, scatters, one-hot, top-k, unique
    linalg,  # MatMul, Gemm, Einsum, Det, MatMulInteger
    logic,  # comparisons, logic, bit operations, float tests
    loss,  # NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss
    mdf_standard,  # MDF: linear, logistic, exponential, scaled trigonometry
    ml,  # ai.onnx.ml encoders, preprocessing, maps
    ml_linear,  # ai.onnx.ml linear models, SVMs, post transforms
    ml_trees,  # ai.onnx.ml TreeEnsemble
    ml_trees_legacy,  # ai.onnx.ml TreeEnsembleRegressor / -Classifier
    norm,  # BatchNormalization, LayerNormalization, ...
    pool,  # pooling
    preview,  # ai.onnx.preview: FlexAttention
    quant,  # QuantizeLinear, DequantizeLinear, QLinearMatMul, ConvInteger, QLinearConv
    random,  # RandomNormal/Uniform, Bernoulli, Multinomial, Dropout
    reduce,  # Reduce*, ArgMax/ArgMin, CumSum
    resize,  # Resize, Upsample
    rnn,  # RNN, GRU, LSTM
    rnn_cell,  # the recurrent cells the ONNX ops and the ncnn layers run on
    roi,  # MaxRoiPool, RoiAlign
    sequence,  # sequences and optionals
    shape,  # reshapes, transposes, concat/split/slice
    shape_gen,  # Constant, ConstantOfShape, EyeLike, Range, Trilu
    shape_pad,  # Pad, CenterCropPad, DepthToSpace, SpaceToDepth
    signal,  # DFT, STFT, windows, MelWeightMatrix
    text,  # StringNormalizer, TfIdfVectorizer, string ops
    training,  # ai.onnx.preview.training: Adagrad, Adam, Momentum
)
from ._registry import OPS, REQUIRED, OpDef, op  # noqa: F401
from .bind import Bound, bind  # noqa: F401
