"""ai.onnx.ml kernels: ArrayFeatureExtractor, Binarizer, LabelEncoder, CategoryMapper, preprocessing
(Scaler, Normalizer, Imputer, OneHotEncoder, FeatureVectorizer) and the map ops (ZipMap, CastMap,
DictVectorizer; a map is a Python dict, a sequence a list). The linear models and SVMs live in
:mod:`stdops.ops.ml_linear`, the tree ensembles in :mod:`stdops.ops.ml_trees` and
:mod:`stdops.ops.ml_trees_legacy`.

Tables built from attributes (LabelEncoder's key -> value map) are prepared once at load time (the
kernel's ``prepare``) and, for direct calls, on every call. Where the spec is silent, behaviour follows
onnxruntime (documented per kernel).
"""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ..limits import check_elements
from ._registry import from_attributes, op


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


@op("onnx-ml:LabelEncoder-2", prepare=from_attributes(label_encoder_prepare))
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
