"""Text kernels: StringNormalizer, TfIdfVectorizer, StringConcat, StringSplit, RegexFullMatch.

String tensors are numpy ``object`` arrays of ``str`` (``bytes`` elements and numpy ``U``/``S`` arrays
are accepted and decoded as UTF-8). String outputs are ``object`` arrays of ``str``. Per-string work
goes through ``np.frompyfunc`` (there is no vectorized string kernel to call). Ops that build strings check
the characters they would build against ``stdops.limits`` (max_bytes) before building them; regular
expressions run on RE2 (``google-re2``), whose matching time is linear in the input: no pattern can make a
match backtrack for ever.
"""

from __future__ import annotations

import numpy as np

from .. import limits
from ..errors import KernelError
from ._registry import op


def _to_str(s) -> str:
    if isinstance(s, (bytes, bytearray, np.bytes_)):
        return bytes(s).decode("utf-8")
    return str(s)


_to_str_v = np.frompyfunc(_to_str, 1, 1)
_len_v = np.frompyfunc(len, 1, 1)


def _chars(a: np.ndarray) -> np.ndarray:
    """The length of each string of an object array of str, as int64."""
    if a.size == 0:
        return np.zeros(a.shape, np.int64)
    return np.asarray(_len_v(a), dtype=np.int64).reshape(a.shape)


#: bytes a Python str costs beside its characters (object header, hash, length), for the byte limit
_STR_OVERHEAD = 56


def _strings(x, what: str) -> np.ndarray:
    """An object array of str from a string tensor."""
    a = np.asarray(x)
    if a.dtype != object and a.dtype.kind not in "US":
        raise KernelError(f"{what} must be a string tensor, got {a.dtype}")
    if a.size == 0:
        return a.astype(object)
    return np.asarray(_to_str_v(a), dtype=object).reshape(a.shape)


def _obj(a) -> np.ndarray:
    return np.asarray(a, dtype=object)


# --------------------------------------------------------------------------- StringNormalizer
_lower = np.frompyfunc(str.lower, 1, 1)
_upper = np.frompyfunc(str.upper, 1, 1)


@op("onnx:StringNormalizer-10")
def string_normalizer(X, /, *, case_change_action="NONE", is_case_sensitive=0, locale="", stopwords=()):
    """Y = X without the ``stopwords`` (compared case-insensitively unless is_case_sensitive), then
    lower-/upper-cased per case_change_action (LOWER, UPPER, NONE).

    X is [C] or [1, C] strings; Y is [C'] or [1, C'], and [1] / [1, 1] holding "" if every element was
    dropped. Case mapping is Unicode's (Python str.lower/upper), independent of ``locale`` and of the
    machine's installed locales.
    """
    action = str(case_change_action).upper()
    if action not in ("NONE", "LOWER", "UPPER"):
        raise KernelError(f"case_change_action must be LOWER, UPPER or NONE, got {case_change_action!r}")
    x = _strings(X, "StringNormalizer input")
    if x.ndim == 1:
        row, two_d = x, False
    elif x.ndim == 2 and x.shape[0] == 1:
        row, two_d = x[0], True
    else:
        raise KernelError(f"StringNormalizer accepts [C] or [1, C] tensors, got shape {x.shape}")
    stops = [_to_str(s) for s in (stopwords or ())]
    if stops and row.size:
        if is_case_sensitive:
            keep = ~np.isin(row, _obj(stops))
        else:
            keep = ~np.isin(_obj(_lower(row)), _obj([s.lower() for s in stops]))
        row = row[keep]
    if row.size == 0:
        row = _obj([""])
    elif action == "LOWER":
        row = _obj(_lower(row))
    elif action == "UPPER":
        row = _obj(_upper(row))
    else:
        row = row.copy()
    return row.reshape(1, -1) if two_d else row


# --------------------------------------------------------------------------- TfIdfVectorizer
def _match_rows(cand: np.ndarray, pool: np.ndarray) -> np.ndarray:
    """For each row of ``cand`` [M, n] (int ids), the index of the equal row of ``pool`` [P, n], or -1."""
    if cand.shape[0] == 0 or pool.shape[0] == 0:
        return np.full(cand.shape[0], -1, np.int64)
    both = np.concatenate([pool, cand], axis=0)
    _, inv = np.unique(both, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    lut = np.full(int(inv.max()) + 1, -1, np.int64)
    # a pool row wins its class; duplicates in the pool keep the first occurrence
    order = np.arange(pool.shape[0])[::-1]
    lut[inv[: pool.shape[0]][order]] = order
    return lut[inv[pool.shape[0] :]]


@op("onnx:TfIdfVectorizer-9")
def tf_idf_vectorizer(
    X,
    /,
    *,
    max_gram_length,
    max_skip_count,
    min_gram_length,
    mode,
    ngram_counts,
    ngram_indexes,
    pool_int64s=None,
    pool_strings=None,
    weights=None,
):
    """Y[ngram_indexes[i]] = count of pool n-gram i in X (n in [min_gram_length, max_gram_length],
    items taken every s+1 positions for each skip s in [0, max_skip_count]; 1-grams counted once);
    mode TF: the counts, IDF: min(count, 1) * weights[i], TFIDF: count * weights[i].

    X is [C] or [N, C] (int32/int64 with pool_int64s, strings with pool_strings); Y is float32
    [max(ngram_indexes)+1] or [N, max(ngram_indexes)+1] (rows are independent).
    """
    mode = str(mode).upper()
    if mode not in ("TF", "IDF", "TFIDF"):
        raise KernelError(f"TfIdfVectorizer mode must be TF, IDF or TFIDF, got {mode!r}")
    if (pool_int64s is None) == (pool_strings is None):
        raise KernelError("TfIdfVectorizer needs exactly one of pool_int64s and pool_strings")
    lo, hi, skips = int(min_gram_length), int(max_gram_length), int(max_skip_count)
    if lo < 1 or hi < lo or skips < 0:
        raise KernelError(f"TfIdfVectorizer: bad gram lengths [{lo}, {hi}] or max_skip_count {skips}")
    x = np.asarray(X)
    if pool_strings is not None:
        pool = _obj([_to_str(s) for s in pool_strings])
        x = _strings(x, "TfIdfVectorizer input (pool_strings)")
    else:
        pool = np.asarray(pool_int64s, np.int64).reshape(-1)
        if x.dtype.kind not in "iu":
            raise KernelError(f"TfIdfVectorizer input must be int32/int64 with pool_int64s, got {x.dtype}")
    if x.ndim not in (1, 2):
        raise KernelError(f"TfIdfVectorizer input must be [C] or [N, C], got shape {x.shape}")
    counts = [int(c) for c in ngram_counts]
    idx = np.asarray(ngram_indexes, np.int64).reshape(-1)
    if idx.size == 0 or (idx < 0).any():
        raise KernelError("TfIdfVectorizer: ngram_indexes must be non-empty and non-negative")
    # split the pool into n-gram tables, numbering the n-grams in order
    tables, start_gram = {}, 0
    for k, c0 in enumerate(counts):
        n = k + 1
        c1 = counts[k + 1] if k + 1 < len(counts) else pool.size
        if not 0 <= c0 <= c1 <= pool.size or (c1 - c0) % n:
            raise KernelError(
                f"TfIdfVectorizer: ngram_counts {counts} do not split a pool of {pool.size} items into whole {n}-grams"
            )
        tables[n] = (pool[c0:c1].reshape(-1, n), start_gram)
        start_gram += (c1 - c0) // n
    if start_gram != idx.size:
        raise KernelError(f"TfIdfVectorizer: the pool holds {start_gram} n-grams but ngram_indexes has {idx.size}")
    w = np.ones(idx.size, np.float32) if weights is None or len(weights) == 0 else np.asarray(weights, np.float32)
    if w.size != idx.size:
        raise KernelError(f"TfIdfVectorizer: weights has {w.size} entries, expected {idx.size}")
    # token ids: position in the sorted pool vocabulary, -1 for tokens outside it
    vocab = np.unique(pool)
    rows = x.reshape(1, -1) if x.ndim == 1 else x
    nrow, ncol = rows.shape
    if vocab.size and rows.size:
        pos = np.minimum(np.searchsorted(vocab, rows.reshape(-1)), vocab.size - 1)
        ids = np.where(vocab[pos] == rows.reshape(-1), pos, -1).astype(np.int64).reshape(nrow, ncol)
    else:
        ids = np.full((nrow, ncol), -1, np.int64)
    counts_out = np.zeros((nrow, idx.size), np.int64)
    for n in range(lo, hi + 1):
        if n not in tables or tables[n][0].shape[0] == 0:
            continue
        table, first = tables[n]
        pool_ids = np.searchsorted(vocab, table.reshape(-1)).reshape(table.shape).astype(np.int64)
        for s in range(skips + 1 if n > 1 else 1):
            span = (n - 1) * (s + 1)
            m = ncol - span
            if m <= 0:
                break
            cand = np.stack([ids[:, j * (s + 1) : j * (s + 1) + m] for j in range(n)], axis=-1)
            hit = _match_rows(cand.reshape(-1, n), pool_ids).reshape(nrow, m)
            r, c = np.nonzero(hit >= 0)
            np.add.at(counts_out, (r, first + hit[r, c]), 1)
    y_gram = counts_out.astype(np.float32)
    if mode == "IDF":
        y_gram = np.minimum(y_gram, 1.0).astype(np.float32) * w
    elif mode == "TFIDF":
        y_gram = y_gram * w
    out = np.zeros((nrow, int(idx.max()) + 1), np.float32)
    np.add.at(out, (slice(None), idx), y_gram)
    return out[0] if x.ndim == 1 else out


# --------------------------------------------------------------------------- StringConcat / Split / Regex
_concat = np.frompyfunc(lambda a, b: a + b, 2, 1)


@op("onnx:StringConcat-20")
def string_concat(X, Y, /):
    """Z = X + Y elementwise (string concatenation), with NumPy broadcasting. Strings."""
    x, y = _strings(X, "StringConcat X"), _strings(Y, "StringConcat Y")
    try:
        shape = np.broadcast_shapes(x.shape, y.shape)
    except ValueError:
        raise KernelError(f"StringConcat: shapes {x.shape} and {y.shape} do not broadcast") from None
    if 0 in shape:
        return np.empty(shape, object)
    limits.check_array(shape, object, "StringConcat output")
    n_chars = int(np.sum(np.broadcast_to(_chars(x), shape), dtype=np.int64)) + int(
        np.sum(np.broadcast_to(_chars(y), shape), dtype=np.int64)
    )
    limits.check_bytes(n_chars + _STR_OVERHEAD * int(np.prod(shape)), "StringConcat output")
    return _obj(_concat(x, y)).reshape(shape)


@op("onnx:StringSplit-20")
def string_split(X, /, *, delimiter="", maxsplit=None):
    """Y[..., k] = the k-th substring of X[...] split on ``delimiter`` (at most ``maxsplit`` splits,
    the remainder kept whole), padded with "" to the longest; Z[...] = the number of substrings.

    An empty or absent delimiter splits on runs of whitespace and drops leading/trailing whitespace.
    Y: strings, shape X.shape + [max count]; Z: int64, shape of X.
    """
    x = _strings(X, "StringSplit input")
    sep = None if delimiter in (None, "", b"") else _to_str(delimiter)
    ms = -1 if maxsplit is None else int(maxsplit)
    if ms < -1:
        raise KernelError(f"StringSplit maxsplit must be >= 0, got {ms}")
    flat = x.reshape(-1)
    # the pieces hold the input's characters once; each costs a str object: bound their number first
    # (at most one piece per character, plus one, per element)
    limits.check_bytes(
        int(_chars(flat).sum()) + _STR_OVERHEAD * (int(_chars(flat).sum()) + flat.size), "StringSplit output"
    )
    parts = [s.split(sep, ms) for s in flat]  # one str.split per element: no per-character work
    lens = np.array([len(p) for p in parts], np.int64)
    width = int(lens.max()) if lens.size else 0
    limits.check_array((flat.size, width), object, "StringSplit output")
    y = np.full((flat.size, width), "", object)
    if flat.size and width:
        r = np.repeat(np.arange(flat.size), lens)
        c = np.arange(r.size) - np.repeat(np.cumsum(lens) - lens, lens)
        y[r, c] = [s for p in parts for s in p]
    return y.reshape(x.shape + (width,)), lens.reshape(x.shape)


@op("onnx:RegexFullMatch-20")
def regex_full_match(X, /, *, pattern=""):
    """Y = (X fully matches the regular expression ``pattern``), elementwise. Bool, shape of X.

    ``pattern`` uses RE2 syntax (the ONNX spec's): matched by RE2 itself, in time linear in each input;
    a pattern RE2 refuses (backreferences, lookaround, a program above RE2's memory bound) is a KernelError.
    """
    rx = compile_re2(pattern, "RegexFullMatch")
    x = _strings(X, "RegexFullMatch input")
    if x.size == 0:
        return np.zeros(x.shape, np.bool_)
    match = np.frompyfunc(lambda s: rx.fullmatch(s) is not None, 1, 1)
    return np.asarray(match(x), dtype=np.bool_).reshape(x.shape)


def compile_re2(pattern, what: str):
    """A compiled RE2 pattern (UTF-8, errors not logged), or a KernelError naming ``what``."""
    import re2

    opts = re2.Options()
    opts.log_errors = False
    try:
        return re2.compile(_to_str(pattern), opts)
    except re2.error as e:
        msg = e.args[0].decode("utf-8", "replace") if e.args and isinstance(e.args[0], bytes) else str(e)
        raise KernelError(f"{what}: invalid RE2 pattern {pattern!r}: {msg}") from None
    except (TypeError, ValueError, UnicodeDecodeError) as e:
        raise KernelError(f"{what}: invalid pattern {pattern!r}: {e}") from None
