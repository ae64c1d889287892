"""ai.onnx.ml kernels: ArrayFeatureExtractor, Binarizer, LabelEncoder, CategoryMapper, linear
models (LinearRegressor, LinearClassifier), SVMs (SVMRegressor, SVMClassifier), preprocessing
(Scaler, Normalizer, Imputer, OneHotEncoder, FeatureVectorizer) and the map ops (ZipMap, CastMap,
DictVectorizer; a map is a Python dict, a sequence a list). The tree ensembles (TreeEnsemble-5,
TreeEnsembleRegressor, TreeEnsembleClassifier) live in :mod:`stdops.ops.ml_trees`, re-exported here.

Tables built from attributes (LabelEncoder's key -> value map, a tree ensemble's node arrays)
are prepared once by ``*_prepare`` functions; the ONNX adapters call them at load time and the
kernels (for direct calls) on every call. Where the spec is silent, behaviour follows
onnxruntime (documented per kernel).
"""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ..limits import check_elements
from ._registry import op


def _as_array(x) -> np.ndarray:
    return x if isinstance(x, np.ndarray) else np.asarray(x)


# --------------------------------------------------------------------------- ArrayFeatureExtractor


@op("onnx-ml:ArrayFeatureExtractor-1")
def array_feature_extractor(X, Y, /):
    """Z[..., j] = X[..., Y[j]]: selects entries of the last axis of X by the indices Y.

    X (..., F) of float, double, int32, int64 or string; Y int64 indices in [0, F) (any shape,
    flattened). Z has shape (..., len(Y)) with X's dtype; a 1-D X gives shape (1, len(Y)).
    """
    x, y = _as_array(X), _as_array(Y)
    if y.dtype.kind not in "iu":
        raise KernelError(f"ArrayFeatureExtractor: Y must be an integer tensor, got {y.dtype}")
    if x.ndim == 0:
        raise KernelError("ArrayFeatureExtractor: X must have rank >= 1")
    idx = y.reshape(-1).astype(np.int64, copy=False)
    f = x.shape[-1]
    if idx.size and (idx.min() < 0 or idx.max() >= f):
        raise KernelError(f"ArrayFeatureExtractor: indices must be in [0, {f}), got {idx.min()}..{idx.max()}")
    z = np.take(x, idx, axis=-1)
    return z.reshape(1, -1) if x.ndim == 1 else z


# --------------------------------------------------------------------------- Binarizer


@op("onnx-ml:Binarizer-1")
def binarizer(X, /, *, threshold=0.0):
    """Y = 1 where X > threshold, else 0. Shape and dtype of X (float, double, int32, int64)."""
    x = _as_array(X)
    if x.dtype.kind not in "fiu":
        raise KernelError(f"Binarizer: X must be a numeric tensor, got {x.dtype}")
    return (x > threshold).astype(x.dtype)


# --------------------------------------------------------------------------- LabelEncoder


def _str_array(x: np.ndarray) -> np.ndarray:
    """An object/bytes/str array as a NumPy unicode array (for sorted look-ups)."""
    if x.dtype.kind == "U":
        return x
    if x.dtype.kind == "S":
        return np.char.decode(x, "utf-8")
    if x.size == 0:
        return x.astype("U1")
    flat = x.reshape(-1)
    if any(isinstance(v, bytes) for v in flat[:1]):
        flat = np.array([v.decode("utf-8") if isinstance(v, bytes) else v for v in flat], dtype=object)
    return flat.astype(str).reshape(x.shape)


class LabelTable:
    """A key -> value map prepared for vectorized look-ups: sorted unique keys (the last of a
    repeated key wins), their values, the default, and for float keys the value of NaN."""

    def __init__(self, keys: np.ndarray, values: np.ndarray, default, out_dtype: np.dtype):
        if keys.shape[0] != values.shape[0]:
            raise KernelError(f"LabelEncoder: {keys.shape[0]} keys but {values.shape[0]} values")
        self.out_dtype = np.dtype(out_dtype)
        self.string_keys = keys.dtype.kind in "OUS"
        self.nan_value = None
        if self.string_keys:
            keys = _str_array(keys)
        elif keys.dtype.kind == "f":
            nan = np.isnan(keys)
            if nan.any():
                self.nan_value = values[np.nonzero(nan)[0][-1]]
            keys, values = keys[~nan], values[~nan]
        # last occurrence of each key wins: unique over the reversed keys keeps the first (= last)
        rk = keys[::-1]
        uk, first = np.unique(rk, return_index=True)
        self.keys = uk
        self.values = values[::-1][first]
        self.default = default

    def __call__(self, x) -> np.ndarray:
        x = _as_array(x)
        if self.string_keys:
            if x.dtype.kind not in "OUS":
                raise KernelError(f"LabelEncoder: the keys are strings, the input is {x.dtype}")
            xs = _str_array(x)
        else:
            if x.dtype.kind not in "fiu":
                raise KernelError(f"LabelEncoder: the keys are numbers, the input is {x.dtype}")
            xs = x
        out = np.empty(x.shape, self.out_dtype)
        out[...] = self.default
        if self.keys.size:
            pos = np.searchsorted(self.keys, xs)
            pos = np.minimum(pos, self.keys.size - 1)
            hit = self.keys[pos] == xs
            out[hit] = self.values[pos[hit]]
        if self.nan_value is not None and x.dtype.kind == "f":
            out[np.isnan(x)] = self.nan_value
        return out


def _value_kind(dtype: np.dtype) -> str:
    return "s" if dtype.kind in "OUS" else ("f" if dtype.kind == "f" else "i")


def label_encoder_prepare(
    *,
    default_float=-0.0,
    default_int64=-1,
    default_string="_Unused",
    default_tensor=None,
    keys_floats=None,
    keys_int64s=None,
    keys_strings=None,
    keys_tensor=None,
    values_floats=None,
    values_int64s=None,
    values_strings=None,
    values_tensor=None,
) -> LabelTable:
    """Build the LabelEncoder look-up table from its attributes (one keys_* and one values_*)."""
    keys = [
        (k, v)
        for k, v in (
            ("keys_floats", keys_floats),
            ("keys_int64s", keys_int64s),
            ("keys_strings", keys_strings),
            ("keys_tensor", keys_tensor),
        )
        if v is not None
    ]
    vals = [
        (k, v)
        for k, v in (
            ("values_floats", values_floats),
            ("values_int64s", values_int64s),
            ("values_strings", values_strings),
            ("values_tensor", values_tensor),
        )
        if v is not None
    ]
    if len(keys) != 1 or len(vals) != 1:
        raise KernelError(
            f"LabelEncoder needs exactly one keys_* and one values_* attribute, got "
            f"{[k for k, _ in keys] or 'none'} and {[k for k, _ in vals] or 'none'}"
        )
    kname, kv = keys[0]
    vname, vv = vals[0]
    if kname == "keys_floats":
        karr = np.asarray(kv, np.float32)
    elif kname == "keys_int64s":
        karr = np.asarray(kv, np.int64)
    elif kname == "keys_strings":
        karr = np.asarray(list(kv), dtype=object)
    else:
        karr = np.asarray(kv).reshape(-1)
    if vname == "values_floats":
        varr, dflt = np.asarray(vv, np.float32), np.float32(default_float)
    elif vname == "values_int64s":
        varr, dflt = np.asarray(vv, np.int64), np.int64(default_int64)
    elif vname == "values_strings":
        varr, dflt = np.asarray(list(vv), dtype=object), str(default_string)
    else:
        varr = np.asarray(vv).reshape(-1)
        if default_tensor is not None:
            d = np.asarray(default_tensor).reshape(-1)
            if d.size != 1:
                raise KernelError(f"LabelEncoder: default_tensor must hold one value, got shape {d.shape}")
            dflt = d[0]
        else:
            dflt = {"s": "_Unused", "f": -0.0, "i": -1}[_value_kind(varr.dtype)]
    out_dtype = np.dtype(object) if varr.dtype.kind in "OUS" else varr.dtype
    if out_dtype == np.dtype(object):
        varr = np.asarray([v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in varr.tolist()], dtype=object)
        if isinstance(dflt, bytes):
            dflt = dflt.decode("utf-8")
    return LabelTable(karr, varr, dflt, out_dtype)


@op("onnx-ml:LabelEncoder-2")
def label_encoder(
    X,
    /,
    *,
    default_float=-0.0,
    default_int64=-1,
    default_string="_Unused",
    default_tensor=None,
    keys_floats=None,
    keys_int64s=None,
    keys_strings=None,
    keys_tensor=None,
    values_floats=None,
    values_int64s=None,
    values_strings=None,
    values_tensor=None,
):
    """Y[i] = values[j] where keys[j] == X[i] (the last such j), else the default.

    Exactly one keys_* and one values_* attribute (lists or 1-D tensors; *_tensor attributes from
    LabelEncoder-4 on). NaN keys match any NaN input. Y has X's shape and the values' dtype
    (float32 for values_floats, int64 for values_int64s, strings for values_strings, the tensor's
    dtype for values_tensor). Defaults: default_float -0.0, default_int64 -1, default_string
    "_Unused"; with values_tensor, default_tensor (else "_Unused" / -1 / -0.0 by value type).
    """
    return label_encoder_prepare(
        default_float=default_float,
        default_int64=default_int64,
        default_string=default_string,
        default_tensor=default_tensor,
        keys_floats=keys_floats,
        keys_int64s=keys_int64s,
        keys_strings=keys_strings,
        keys_tensor=keys_tensor,
        values_floats=values_floats,
        values_int64s=values_int64s,
        values_strings=values_strings,
        values_tensor=values_tensor,
    )(X)


# --------------------------------------------------------------------------- post transforms (shared with ml_trees)

TRANSFORMS = {"NONE": 0, "SOFTMAX": 1, "LOGISTIC": 2, "SOFTMAX_ZERO": 3, "PROBIT": 4}


def _logistic(v: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(v))
    return np.where(v >= 0, 1 / (1 + e), e / (1 + e))


def _softmax_rows(v: np.ndarray) -> np.ndarray:
    e = np.exp(v - v.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _softmax_zero_rows(v: np.ndarray) -> np.ndarray:
    """Softmax over the non-zero scores of a row; zero scores stay 0; an all-zero row gives 0.5."""
    nz = np.abs(v) > 1e-7
    mx = v.max(axis=-1, keepdims=True)
    e = np.where(nz, np.exp(np.where(nz, v - mx, 0)), 0)
    s = e.sum(axis=-1, keepdims=True)
    return np.where(s == 0, v.dtype.type(0.5), e / np.where(s == 0, 1, s))


def post_transform_scores(v: np.ndarray, transform: int) -> np.ndarray:
    """NONE 0, SOFTMAX 1, LOGISTIC 2, SOFTMAX_ZERO 3, PROBIT 4 applied to scores (N, T)."""
    t = int(transform)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        if t == 0:
            return v
        if t == 1:
            return _softmax_rows(v)
        if t == 2:
            return _logistic(v)
        if t == 3:
            return _softmax_zero_rows(v)
        if t == 4:
            import scipy.special

            return scipy.special.ndtri(v).astype(v.dtype, copy=False)
    raise KernelError(f"post_transform must be 0..4 (NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO, PROBIT), got {transform}")


def _enum(value, table: dict, what: str, name: str) -> int:
    v = str(value).upper()
    if v not in table:
        raise KernelError(f"{what}: {name} must be one of {', '.join(table)}, got {value!r}")
    return table[v]


# --------------------------------------------------------------------------- linear models and preprocessing


def _numeric_2d(x, opname: str) -> np.ndarray:
    x = _as_array(x)
    if x.dtype.kind not in "fiu":
        raise KernelError(f"{opname}: X must be a numeric tensor, got {x.dtype}")
    if x.ndim == 1:
        x = x.reshape(1, -1)
    if x.ndim != 2:
        raise KernelError(f"{opname}: X must have shape (N, F) or (F,), got {x.shape}")
    return x


def _floats(x: np.ndarray) -> np.ndarray:
    """Arithmetic type of the ML ops: float64 stays float64, everything else computes in float32."""
    return x if x.dtype == np.float64 else x.astype(np.float32)


def _per_feature(v, f: int, opname: str, name: str, dtype) -> np.ndarray:
    a = np.asarray(v if v is not None and len(v) else [0.0], dtype).reshape(-1)
    if a.size not in (1, f):
        raise KernelError(f"{opname}: {name} has {a.size} values for {f} features (need 1 or {f})")
    return a


@op("onnx-ml:Scaler-1")
def scaler(X, /, *, offset=None, scale=None):
    """Y = (X - offset) * scale, offset and scale of length 1 or F (last axis; absent: 0 and 1).

    X float, double, int64 or int32; Y float32 of X's shape.
    """
    x = _as_array(X)
    if x.dtype.kind not in "fiu":
        raise KernelError(f"Scaler: X must be a numeric tensor, got {x.dtype}")
    f = x.shape[-1] if x.ndim else 1
    off = _per_feature(offset, f, "Scaler", "offset", np.float32)
    sc = _per_feature(scale if scale is not None and len(scale) else [1.0], f, "Scaler", "scale", np.float32)
    return ((_floats(x) - off) * sc).astype(np.float32)


@op("onnx-ml:Normalizer-1")
def normalizer(X, /, *, norm="MAX"):
    """Per row of X (N, C) or of X (C,): Y = X / max(X) (MAX), X / sum|X| (L1), X / sqrt(sum X^2)
    (L2); a row whose divisor is 0 is returned unchanged. Y float32 of X's shape."""
    x = _as_array(X)
    if x.dtype.kind not in "fiu" or x.ndim not in (1, 2):
        raise KernelError(f"Normalizer: X must be a numeric (N, C) or (C,) tensor, got {x.dtype} {x.shape}")
    xf = _floats(x)
    mode = str(norm).upper()
    if mode == "MAX":
        d = xf.max(axis=-1, keepdims=True) if x.shape[-1] else np.ones(x.shape[:-1] + (1,), xf.dtype)
    elif mode == "L1":
        d = np.abs(xf).sum(axis=-1, keepdims=True)
    elif mode == "L2":
        d = np.sqrt((xf * xf).sum(axis=-1, keepdims=True))
    else:
        raise KernelError(f"Normalizer: norm must be MAX, L1 or L2, got {norm!r}")
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.where(d == 0, xf, xf / np.where(d == 0, 1, d))
    return y.astype(np.float32)


def _linear_scores(x: np.ndarray, coefficients, intercepts, rows: int | None, opname: str) -> np.ndarray:
    """X (N, F) @ W^T + b with W the coefficients as (rows, F) (rows inferred when None)."""
    w = np.asarray(coefficients if coefficients is not None else [], np.float64).reshape(-1)
    f = x.shape[1]
    if rows is None:
        if f == 0 or w.size % f:
            raise KernelError(f"{opname}: {w.size} coefficients do not split into rows of {f} features")
        rows = w.size // f
    if w.size != rows * f:
        raise KernelError(f"{opname}: expected {rows} x {f} coefficients, got {w.size}")
    xf = _floats(x)
    s = xf @ w.reshape(rows, f).T.astype(xf.dtype)
    if intercepts is not None and len(intercepts):
        b = np.asarray(intercepts, xf.dtype).reshape(-1)
        if b.size not in (1, rows):
            raise KernelError(f"{opname}: {b.size} intercepts for {rows} outputs")
        s = s + b
    return s


@op("onnx-ml:LinearRegressor-1")
def linear_regressor(X, /, *, coefficients=None, intercepts=None, post_transform="NONE", targets=1):
    """Y = post_transform(X W^T + intercepts), W = coefficients as (targets, F).

    X (N, F) or (F,) numeric; Y (N, targets) float32.
    """
    x = _numeric_2d(X, "LinearRegressor")
    t = _enum(post_transform, TRANSFORMS, "LinearRegressor", "post_transform")
    s = _linear_scores(x, coefficients, intercepts, int(targets), "LinearRegressor").astype(np.float32)
    return post_transform_scores(s, t).astype(np.float32, copy=False)


@op("onnx-ml:LinearClassifier-1")
def linear_classifier(
    X,
    /,
    *,
    classlabels_ints=None,
    classlabels_strings=None,
    coefficients,
    intercepts=None,
    multi_class=0,
    post_transform="NONE",
):
    """Z = post_transform(X W^T + intercepts), W = coefficients as (E, F); Y = labels[argmax Z].

    With two labels and one row of coefficients the score s is the second class's: p = s
    (LOGISTIC: sigmoid(s), PROBIT: probit(s); a softmax of one score is skipped), Z = (1 - p, p),
    Y = the second label where p > 0 (LOGISTIC: p > 0.5). With one row and one label (or none),
    Y = label (1) where the score is >= 0 (NONE) / 0.5 (other transforms), else 0 (the empty
    string). multi_class is not used (as in onnxruntime).
    X (N, F) or (F,) numeric; Y (N,) int64 or strings; Z (N, E) float32.
    """
    x = _numeric_2d(X, "LinearClassifier")
    t = _enum(post_transform, TRANSFORMS, "LinearClassifier", "post_transform")
    if classlabels_ints is not None and classlabels_strings is not None:
        raise KernelError("LinearClassifier: only one of classlabels_ints and classlabels_strings may be given")
    labels = (
        np.asarray(classlabels_strings, dtype=object)
        if classlabels_strings is not None
        else np.asarray(classlabels_ints if classlabels_ints is not None else [], np.int64)
    )
    s = _linear_scores(x, coefficients, intercepts, None, "LinearClassifier").astype(np.float32)
    if s.shape[1] == 1 and labels.size == 2:  # binary: one score, the second class's
        p = post_transform_scores(s, t) if t in (2, 4) else s  # softmax of one score is skipped
        hit = p[:, 0] > (0.5 if t == 2 else 0.0)
        return labels[hit.astype(np.int64)], np.concatenate([1 - p, p], axis=1).astype(np.float32)
    z = post_transform_scores(s, t).astype(np.float32, copy=False)
    if z.shape[1] > 1:
        if labels.size != z.shape[1]:
            raise KernelError(f"LinearClassifier: {labels.size} class labels for {z.shape[1]} score columns")
        return labels[np.argmax(z, axis=1)] if z.shape[0] else labels[:0], z
    hit = z[:, 0] >= (0.0 if t == 0 else 0.5)
    if labels.dtype == object:
        lab = labels[0] if labels.size else ""
        return np.where(hit, lab, "").astype(object), z
    return np.where(hit, labels[0] if labels.size else 1, 0).astype(np.int64), z


@op("onnx-ml:Imputer-1")
def imputer(
    X, /, *, imputed_value_floats=None, imputed_value_int64s=None, replaced_value_float=0.0, replaced_value_int64=0
):
    """Y = X with every element equal to the replaced value (NaN matches NaN) set to the imputed
    value of its feature (one value, or one per feature of the last axis). Shape and dtype of X."""
    x = _as_array(X)
    if x.dtype.kind == "f":
        vals, rep = imputed_value_floats, float(replaced_value_float)
    elif x.dtype.kind in "iu":
        vals, rep = imputed_value_int64s, int(replaced_value_int64)
    else:
        raise KernelError(f"Imputer: X must be a numeric tensor, got {x.dtype}")
    if vals is None or len(vals) == 0:
        raise KernelError(
            f"Imputer: imputed_value_{'floats' if x.dtype.kind == 'f' else 'int64s'} is needed for {x.dtype} input"
        )
    f = x.shape[-1] if x.ndim else 1
    v = _per_feature(vals, f, "Imputer", "the imputed values", x.dtype)
    hit = np.isnan(x) if (x.dtype.kind == "f" and np.isnan(rep)) else (x == rep)
    return np.where(hit, v, x).astype(x.dtype, copy=False)


@op("onnx-ml:FeatureVectorizer-1")
def feature_vectorizer(*X, inputdimensions=None):
    """Y = the inputs side by side: each (N, C_i) (a 1-D input is (1, C)) cut or zero-padded to
    inputdimensions[i] columns, concatenated along axis 1. Y float32."""
    if not X:
        raise KernelError("FeatureVectorizer needs at least one input")
    dims = list(inputdimensions) if inputdimensions is not None else [None] * len(X)
    if len(dims) != len(X):
        raise KernelError(f"FeatureVectorizer: {len(dims)} inputdimensions for {len(X)} inputs")
    parts = []
    for a, d in zip(X, dims):
        a = _as_array(a)
        if a.dtype.kind not in "fiu" or a.ndim not in (1, 2):
            raise KernelError(f"FeatureVectorizer: inputs must be numeric (N, C) or (C,), got {a.dtype} {a.shape}")
        a = a.reshape(1, -1) if a.ndim == 1 else a
        d = a.shape[1] if d is None else int(d)
        b = np.zeros((a.shape[0], d), np.float32)
        b[:, : min(d, a.shape[1])] = a[:, :d]
        parts.append(b)
    n = {p.shape[0] for p in parts}
    if len(n) != 1:
        raise KernelError(f"FeatureVectorizer: inputs have different batch sizes {sorted(n)}")
    return np.concatenate(parts, axis=1)


@op("onnx-ml:CategoryMapper-1")
def category_mapper(X, /, *, cats_int64s=None, cats_strings=None, default_int64=-1, default_string="_Unused"):
    """Strings -> the integer paired with them in (cats_strings, cats_int64s) (default_int64 when
    absent); integers -> the paired string (default_string). Y has X's shape."""
    ints, strs = tuple(cats_int64s or ()), tuple(cats_strings or ())
    if len(ints) != len(strs):
        raise KernelError(f"CategoryMapper: {len(ints)} cats_int64s but {len(strs)} cats_strings")
    x = _as_array(X)
    if x.dtype.kind in "OUS":
        return label_encoder_prepare(keys_strings=strs, values_int64s=ints, default_int64=default_int64)(x)
    if x.dtype.kind in "iu":
        return label_encoder_prepare(keys_int64s=ints, values_strings=strs, default_string=default_string)(x)
    raise KernelError(f"CategoryMapper: X must be strings or int64, got {x.dtype}")


@op("onnx-ml:OneHotEncoder-1")
def one_hot_encoder(X, /, *, cats_int64s=None, cats_strings=None, zeros=1):
    """Y[..., j] = 1 where X equals category j, else 0 (numbers are truncated to int64 and looked up
    in cats_int64s, strings in cats_strings); with zeros=0 a value in no category is an error.
    Y float32 of shape X.shape + (number of categories,)."""
    x = _as_array(X)
    if (cats_int64s is None) == (cats_strings is None):
        raise KernelError("OneHotEncoder: exactly one of cats_int64s and cats_strings must be given")
    if x.dtype.kind in "OUS":
        if cats_strings is None:
            raise KernelError("OneHotEncoder: string input needs cats_strings")
        cats = np.asarray([str(c) for c in cats_strings], dtype=object)
        xs = _str_array(x)
        key = _str_array(cats)
    elif x.dtype.kind in "fiu":
        if cats_int64s is None:
            raise KernelError("OneHotEncoder: numeric input needs cats_int64s")
        key = np.asarray(cats_int64s, np.int64)
        xs = x.astype(np.int64) if x.dtype.kind != "f" else np.where(np.isfinite(x), x, -(2**62)).astype(np.int64)
    else:
        raise KernelError(f"OneHotEncoder: unsupported input dtype {x.dtype}")
    y = (xs[..., None] == key.reshape((1,) * xs.ndim + (-1,))).astype(np.float32)
    if not int(zeros) and x.size and not y.any(axis=-1).all():
        raise KernelError("OneHotEncoder: an input value is in no category (zeros=0)")
    return y


@op("onnx-ml:ZipMap-1")
def zip_map(X, /, *, classlabels_int64s=None, classlabels_strings=None):
    """Z = [{label_j: X[n, j]} for each row n]: a sequence of maps (Python dicts) from the class
    labels to the row's float32 values. X (N, E) float32, E = number of labels."""
    if (classlabels_int64s is None) == (classlabels_strings is None):
        raise KernelError("ZipMap: exactly one of classlabels_int64s and classlabels_strings must be given")
    labels = list(classlabels_strings) if classlabels_strings is not None else [int(v) for v in classlabels_int64s]
    x = _as_array(X)
    x = x.reshape(1, -1) if x.ndim == 1 else x
    if x.ndim != 2 or x.shape[1] != len(labels):
        raise KernelError(f"ZipMap: X must have shape (N, {len(labels)}), got {x.shape}")
    rows = x.astype(np.float32).tolist()  # one dict per row: the output type is a sequence of maps
    return [dict(zip(labels, r)) for r in rows]


# --------------------------------------------------------------------------- SVMRegressor, maps


def svm_kernel(x: np.ndarray, sv: np.ndarray, kernel_type: str, kernel_params) -> np.ndarray:
    """K[n, j] = k(x_n, sv_j): LINEAR x.sv, POLY (gamma x.sv + coef0)^degree, RBF exp(-gamma |x-sv|^2),
    SIGMOID tanh(gamma x.sv + coef0); kernel_params = (gamma, coef0, degree)."""
    gamma, coef0, degree = (list(kernel_params) + [0.0, 0.0, 0.0])[:3] if kernel_params else (0.0, 0.0, 0.0)
    k = str(kernel_type).upper()
    dot = x @ sv.T
    if k == "LINEAR":
        return dot
    if k == "POLY":
        return (gamma * dot + coef0) ** int(degree)
    if k == "SIGMOID":
        return np.tanh(gamma * dot + coef0)
    if k == "RBF":
        d2 = (x * x).sum(1)[:, None] - 2 * dot + (sv * sv).sum(1)[None, :]
        return np.exp(-gamma * np.maximum(d2, 0))
    raise KernelError(f"SVM: kernel_type must be LINEAR, POLY, RBF or SIGMOID, got {kernel_type!r}")


@op("onnx-ml:SVMRegressor-1")
def svm_regressor(
    X,
    /,
    *,
    coefficients=None,
    kernel_params=None,
    kernel_type="LINEAR",
    n_supports=0,
    one_class=0,
    post_transform="NONE",
    rho=None,
    support_vectors=None,
):
    """s = sum_j coefficients[j] k(x, support_vectors[j]) + rho[0] (with n_supports = 0: the linear
    s = x . coefficients + rho[0]); Y = post_transform(s), or sign(s) in {1, -1} when one_class.

    X (N, F) or (F,) numeric; Y (N, 1) float32. Computed in float64.
    """
    x = _numeric_2d(X, "SVMRegressor").astype(np.float64)
    t = _enum(post_transform, TRANSFORMS, "SVMRegressor", "post_transform")
    c = np.asarray(coefficients if coefficients is not None else [], np.float64).reshape(-1)
    r = float(rho[0]) if rho is not None and len(rho) else 0.0
    f = x.shape[1]
    ns = int(n_supports)
    if ns > 0:
        sv = np.asarray(support_vectors if support_vectors is not None else [], np.float64).reshape(-1)
        if sv.size != ns * f or c.size != ns:
            raise KernelError(
                f"SVMRegressor: {ns} support vectors need {ns * f} support_vectors values and {ns} "
                f"coefficients, got {sv.size} and {c.size}"
            )
        s = svm_kernel(x, sv.reshape(ns, f), kernel_type, kernel_params) @ c + r
    else:
        if c.size != f:
            raise KernelError(f"SVMRegressor: a linear SVM needs {f} coefficients, got {c.size}")
        s = x @ c + r
    s = s.reshape(-1, 1)
    if int(one_class):
        return np.where(s > 0, 1.0, -1.0).astype(np.float32)
    return post_transform_scores(s.astype(np.float32), t).astype(np.float32, copy=False)


@op("onnx-ml:CastMap-1")
def cast_map(X, /, *, cast_to="TO_FLOAT", map_form="DENSE", max_map=1):
    """Y = the values of the map X (int64 keys) in ascending key order (DENSE), or a vector of length
    max_map with Y[key] = value and 0 elsewhere (SPARSE); cast to float32, int64 or strings
    (cast_to TO_FLOAT / TO_INT64 / TO_STRING; numbers print as "%f"). Y has shape (1, n)."""
    if not isinstance(X, dict):
        raise KernelError(f"CastMap: X must be a map (dict), got {type(X).__name__}")
    to = {"TO_FLOAT": np.float32, "TO_INT64": np.int64, "TO_STRING": object}.get(str(cast_to).upper())
    if to is None:
        raise KernelError(f"CastMap: cast_to must be TO_FLOAT, TO_INT64 or TO_STRING, got {cast_to!r}")
    keys = np.asarray(sorted(int(k) for k in X), np.int64)
    vals = [X[k] for k in keys.tolist()]
    if to is object:
        conv = np.asarray([v if isinstance(v, str) else f"{float(v):f}" for v in vals], dtype=object)
    else:
        conv = np.asarray([float(v) for v in vals]).astype(to) if vals else np.zeros(0, to)
    form = str(map_form).upper()
    if form == "DENSE":
        return conv.reshape(1, -1)
    if form != "SPARSE":
        raise KernelError(f"CastMap: map_form must be DENSE or SPARSE, got {map_form!r}")
    n = int(max_map)
    check_elements((n,), "CastMap output")
    if keys.size and (keys.min() < 0 or keys.max() >= n):
        raise KernelError(f"CastMap: keys must be in [0, max_map={n}) for SPARSE")
    out = np.full(n, f"{0.0:f}", dtype=object) if to is object else np.zeros(n, to)
    out[keys] = conv
    return out.reshape(1, -1)


@op("onnx-ml:DictVectorizer-1")
def dict_vectorizer(X, /, *, int64_vocabulary=None, string_vocabulary=None):
    """Y[i] = X[vocabulary[i]] (0 / "" for a word the map lacks): a map (or a sequence of maps, one
    row each) turned into a (1, V) (or (N, V)) tensor of the map's value type."""
    if (int64_vocabulary is None) == (string_vocabulary is None):
        raise KernelError("DictVectorizer: exactly one of int64_vocabulary and string_vocabulary must be given")
    vocab = list(string_vocabulary) if string_vocabulary is not None else [int(v) for v in int64_vocabulary]
    maps = X if isinstance(X, list) else [X]
    if not all(isinstance(m, dict) for m in maps):
        raise KernelError("DictVectorizer: X must be a map (dict) or a sequence of maps")
    sample = next((v for m in maps for v in m.values()), 0.0)
    dtype = (
        object
        if isinstance(sample, str)
        else np.int64
        if isinstance(sample, (int, np.integer))
        else np.asarray(sample).dtype
        if isinstance(sample, np.generic)
        else np.float32
    )
    rows = [[m.get(w, "" if dtype is object else 0) for w in vocab] for m in maps]  # per map entry
    return np.asarray(rows, dtype=dtype).reshape(len(maps), len(vocab))


# --------------------------------------------------------------------------- SVMClassifier


def _pairwise_coupling(r: np.ndarray) -> np.ndarray:
    """Class probabilities p (N, k) from pairwise probabilities r[n, i, j] = P(i | i or j), by the
    fixed-point iteration of Wu, Lin and Weng (2004) (the one libsvm uses), for all samples at once:
    minimize p^T Q p with Q[t, t] = sum_{j != t} r[j, t]^2, Q[t, j] = -r[j, t] r[t, j]."""
    n, k = r.shape[:2]
    off = ~np.eye(k, dtype=bool)
    rt = np.swapaxes(r, 1, 2)
    Q = -rt * r * off
    Q[:, np.arange(k), np.arange(k)] = ((rt**2) * off).sum(axis=2)
    p = np.full((n, k), 1.0 / k)
    eps = 0.005 / k
    active = np.ones(n, bool)
    for _ in range(max(100, k)):  # iterations of the solver, vectorized over samples
        Qp = np.einsum("nij,nj->ni", Q, p)
        pQp = (p * Qp).sum(axis=1)
        active &= np.abs(Qp - pQp[:, None]).max(axis=1) >= eps
        if not active.any():
            break
        a = active[:, None]
        for t in range(k):
            diff = (pQp - Qp[:, t]) / Q[:, t, t]
            diff = np.where(active, diff, 0.0)
            p[:, t] += diff
            pQp = (pQp + diff * (diff * Q[:, t, t] + 2 * Qp[:, t])) / (1 + diff) ** 2
            p = np.where(a, p / (1 + diff)[:, None], p)
            Qp = np.where(a, (Qp + diff[:, None] * Q[:, t, :]) / (1 + diff)[:, None], Qp)
    return p


@op("onnx-ml:SVMClassifier-1")
def svm_classifier(
    X,
    /,
    *,
    classlabels_ints=None,
    classlabels_strings=None,
    coefficients=None,
    kernel_params=None,
    kernel_type="LINEAR",
    post_transform="NONE",
    prob_a=None,
    prob_b=None,
    rho=None,
    support_vectors=None,
    vectors_per_class=None,
):
    """One-vs-one SVM (libsvm layout): for classes i < j (pair p),
    d_p = rho[p] + sum_{v in i} coef[j-1, v] k(x, sv_v) + sum_{v in j} coef[i, v] k(x, sv_v);
    d_p > 0 votes for i, else j. With prob_a/prob_b, Z = class probabilities coupled from the
    pairwise 1 - sigmoid(d_p prob_a[p] + prob_b[p]), else Z = the decision values; post_transform
    is applied to Z; Y = the class with most votes (first on ties), as onnxruntime.
    Without support vectors (vectors_per_class empty) the model is linear: Z[e] = x . coef[e] + rho[0],
    Y = argmax Z. With one decision value d (two classes) Z = (-d, d) (NONE, LOGISTIC: of that
    pair), (1 - d, d) for SOFTMAX / SOFTMAX_ZERO (a softmax of one value is skipped).
    X (N, F) numeric; Y (N,) int64 or strings; Z float32.
    """
    x = _numeric_2d(X, "SVMClassifier").astype(np.float64)
    t = _enum(post_transform, TRANSFORMS, "SVMClassifier", "post_transform")
    if classlabels_ints is not None and classlabels_strings is not None:
        raise KernelError("SVMClassifier: only one of classlabels_ints and classlabels_strings may be given")
    labels = (
        np.asarray(classlabels_strings, dtype=object)
        if classlabels_strings is not None
        else np.asarray(classlabels_ints if classlabels_ints is not None else [], np.int64)
    )
    E = max(labels.size, 1)
    c = np.asarray(coefficients if coefficients is not None else [], np.float64).reshape(-1)
    r = np.asarray(rho if rho is not None else [0.0], np.float64).reshape(-1)
    vpc = np.asarray(vectors_per_class if vectors_per_class is not None else [], np.int64).reshape(-1)
    V, (N, F) = int(vpc.sum()), x.shape
    votes = None
    if V > 0:
        if vpc.size != E or (vpc < 0).any():
            raise KernelError(f"SVMClassifier: vectors_per_class must have one count per class ({E})")
        sv = np.asarray(support_vectors if support_vectors is not None else [], np.float64).reshape(-1)
        P = E * (E - 1) // 2
        if sv.size != V * F or c.size != (E - 1) * V or r.size < P:
            raise KernelError(
                f"SVMClassifier: {V} support vectors of {F} features need {V * F} support_vectors, "
                f"{(E - 1) * V} coefficients and {P} rho values; got {sv.size}, {c.size}, {r.size}"
            )
        kmat = svm_kernel(x, sv.reshape(V, F), kernel_type, kernel_params)  # (N, V)
        coef = c.reshape(E - 1, V)
        start = np.concatenate([[0], np.cumsum(vpc)])
        dec = np.empty((N, P))
        votes = np.zeros((N, E), np.int64)
        p = 0
        for i in range(E):  # over class pairs
            si = slice(start[i], start[i + 1])
            for j in range(i + 1, E):
                sj = slice(start[j], start[j + 1])
                dec[:, p] = r[p] + kmat[:, si] @ coef[j - 1, si] + kmat[:, sj] @ coef[i, sj]
                votes[:, i] += dec[:, p] > 0
                votes[:, j] += dec[:, p] <= 0
                p += 1
    else:
        if c.size != E * F:
            raise KernelError(f"SVMClassifier: a linear SVM needs {E} x {F} coefficients, got {c.size}")
        dec = x @ c.reshape(E, F).T + r[0]
    pa = np.asarray(prob_a if prob_a is not None else [], np.float64).reshape(-1)
    pb = np.asarray(prob_b if prob_b is not None else [], np.float64).reshape(-1)
    if pa.size and V > 0:
        if pa.size != dec.shape[1] or pb.size != pa.size:
            raise KernelError(f"SVMClassifier: prob_a and prob_b need {dec.shape[1]} values each")
        pair = np.clip(1 - _logistic(dec * pa + pb), 1e-7, 1 - 1e-7)
        rr = np.zeros((N, E, E))
        iu, ju = np.triu_indices(E, 1)
        rr[:, iu, ju] = pair
        rr[:, ju, iu] = 1 - pair
        z = post_transform_scores(_pairwise_coupling(rr).astype(np.float32), t)
        idx = np.argmax(votes, axis=1)
    else:
        z = dec
        if votes is not None:
            idx = np.argmax(votes, axis=1)
        elif z.shape[1] == 1:
            idx = (z[:, 0] > 0).astype(np.int64)
        else:
            idx = np.argmax(z, axis=1)
        if z.shape[1] == 1 and labels.size == 2 and t in (1, 3):  # a softmax of one value is skipped
            z = np.concatenate([1 - z, z], axis=1).astype(np.float32)
        else:
            if z.shape[1] == 1 and labels.size == 2:
                z = np.concatenate([-z, z], axis=1)
            z = post_transform_scores(z.astype(np.float32), t)
    if labels.size == 0:
        return idx.astype(np.int64), z.astype(np.float32)
    if idx.size and idx.max() >= labels.size:
        raise KernelError(f"SVMClassifier: {labels.size} class labels for class index {idx.max()}")
    return labels[idx], z.astype(np.float32)


# the tree ensembles live in ml_trees (imported last: it uses the helpers above)
from .ml_trees import (  # noqa: E402,F401
    Forest,
    LegacyClassifier,
    legacy_forest,
    tree_ensemble,
    tree_ensemble_classifier,
    tree_ensemble_classifier_prepare,
    tree_ensemble_prepare,
    tree_ensemble_regressor,
    tree_ensemble_regressor_prepare,
)
