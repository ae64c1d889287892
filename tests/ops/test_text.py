"""Text kernels against plain-Python references written here."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest

from stdops.errors import KernelError
from stdops.ops import text as T


def S(*xs):
    return np.array(list(xs), dtype=object)


# --------------------------------------------------------------------------- StringNormalizer
NORM = [
    # input, kwargs, expected
    (S("monday", "tuesday"), {}, ["monday", "tuesday"]),
    (S("Monday", "tuesday", "MONDAY"), {"stopwords": ("monday",)}, ["tuesday"]),
    (
        S("Monday", "tuesday", "MONDAY"),
        {"stopwords": ("monday",), "is_case_sensitive": 1},
        ["Monday", "tuesday", "MONDAY"],
    ),
    (S("Straße", "İstanbul", "ǅ"), {"case_change_action": "UPPER"}, ["STRASSE", "İSTANBUL", "Ǆ"]),
    (S("ÀÉÎ", "Abc"), {"case_change_action": "LOWER", "locale": "fr_FR"}, ["àéî", "abc"]),
    (S("a", "a"), {"stopwords": ("A",), "case_change_action": "UPPER"}, [""]),
    (S(b"bytes", "str"), {"case_change_action": "UPPER"}, ["BYTES", "STR"]),
]


@pytest.mark.parametrize("x, kw, want", NORM)
def test_string_normalizer(x, kw, want):
    y = T.string_normalizer(x, **kw)
    assert y.dtype == object and y.shape == (len(want),)
    assert y.tolist() == want
    y2 = T.string_normalizer(x.reshape(1, -1), **kw)
    assert y2.shape == (1, len(want)) and y2[0].tolist() == want
    assert x.tolist() == list(x)  # input untouched


def test_string_normalizer_errors():
    with pytest.raises(KernelError):
        T.string_normalizer(np.array([["a"], ["b"]], object))
    with pytest.raises(KernelError):
        T.string_normalizer(S("a"), case_change_action="TITLE")
    with pytest.raises(KernelError):
        T.string_normalizer(np.array([1, 2]))


# --------------------------------------------------------------------------- TfIdfVectorizer
def _ref_tfidf(row, pool_ngrams, lo, hi, skips, mode, weights, indexes):
    cnt = Counter()
    for n in range(lo, hi + 1):
        for s in range(skips + 1) if n > 1 else [0]:
            step = s + 1
            for i in range(len(row) - (n - 1) * step):
                cnt[tuple(row[i + j * step] for j in range(n))] += 1
    out = np.zeros(max(indexes) + 1, np.float32)
    for k, g in enumerate(pool_ngrams):
        if not lo <= len(g) <= hi:
            continue
        c = cnt.get(g, 0)
        out[indexes[k]] += {"TF": c, "IDF": min(c, 1) * weights[k], "TFIDF": c * weights[k]}[mode]
    return out


POOL = [2, 3, 5, 4, 5, 6, 7, 8, 6, 7, 1, 1, 3]  # unigrams 2 3 5 4; bigrams (5,6) (7,8) (6,7); trigram (1,1,3)
POOL_NGRAMS = [(2,), (3,), (5,), (4,), (5, 6), (7, 8), (6, 7), (1, 1, 3)]
COUNTS = [0, 4, 10]


@pytest.mark.parametrize("lo, hi, skips", [(1, 1, 0), (2, 2, 0), (1, 2, 5), (1, 3, 1), (3, 3, 2), (2, 3, 0)])
@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
def test_tfidf_ints(lo, hi, skips, mode):
    x = np.array([[1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8], [5, 6, 7, 8, 1, 2, 1, 3, 5, 6, 2, 2]], np.int64)
    idx = [7, 0, 1, 2, 3, 4, 6, 5]
    w = [0.5, 1.0, 2.0, 0.25, 3.0, 1.5, 0.75, 2.5]
    y = T.tf_idf_vectorizer(
        x,
        max_gram_length=hi,
        min_gram_length=lo,
        max_skip_count=skips,
        mode=mode,
        ngram_counts=COUNTS,
        ngram_indexes=idx,
        pool_int64s=POOL,
        weights=w,
    )
    want = np.stack([_ref_tfidf(r.tolist(), POOL_NGRAMS, lo, hi, skips, mode, w, idx) for r in x])
    assert y.dtype == np.float32 and y.shape == (2, 8)
    np.testing.assert_allclose(y, want)
    y1 = T.tf_idf_vectorizer(
        x[0].astype(np.int32),
        max_gram_length=hi,
        min_gram_length=lo,
        max_skip_count=skips,
        mode=mode,
        ngram_counts=COUNTS,
        ngram_indexes=idx,
        pool_int64s=POOL,
        weights=w,
    )
    assert y1.shape == (8,)
    np.testing.assert_allclose(y1, want[0])


def test_tfidf_strings_default_weights():
    pool = ("a", "b", "c", "a", "b", "b", "a")
    x = S("a", "b", "a", "b", "z", "c", "b", "a")
    y = T.tf_idf_vectorizer(
        x,
        max_gram_length=2,
        min_gram_length=1,
        max_skip_count=1,
        mode="TFIDF",
        ngram_counts=(0, 3),
        ngram_indexes=(0, 1, 2, 3, 4),
        pool_strings=pool,
    )
    want = _ref_tfidf(
        list(x), [("a",), ("b",), ("c",), ("a", "b"), ("b", "a")], 1, 2, 1, "TF", [1] * 5, [0, 1, 2, 3, 4]
    )
    np.testing.assert_allclose(y, want)


def test_tfidf_short_and_empty_rows():
    y = T.tf_idf_vectorizer(
        np.array([[5]], np.int64),
        max_gram_length=3,
        min_gram_length=1,
        max_skip_count=3,
        mode="TF",
        ngram_counts=COUNTS,
        ngram_indexes=range(8),
        pool_int64s=POOL,
    )
    np.testing.assert_array_equal(y, [[0, 0, 1, 0, 0, 0, 0, 0]])
    y = T.tf_idf_vectorizer(
        np.zeros((2, 0), np.int64),
        max_gram_length=2,
        min_gram_length=1,
        max_skip_count=0,
        mode="TF",
        ngram_counts=COUNTS,
        ngram_indexes=range(8),
        pool_int64s=POOL,
    )
    assert y.shape == (2, 8) and not y.any()


@pytest.mark.parametrize(
    "kw",
    [
        {"mode": "BM25"},
        {"pool_strings": ("a",)},
        {"pool_int64s": None},
        {"ngram_counts": (0, 5)},
        {"ngram_indexes": (0, 1)},
        {"weights": (1.0,)},
        {"min_gram_length": 3, "max_gram_length": 2},
    ],
)
def test_tfidf_errors(kw):
    base = dict(
        max_gram_length=2,
        min_gram_length=1,
        max_skip_count=0,
        mode="TF",
        ngram_counts=(0, 4),
        ngram_indexes=range(7),
        pool_int64s=POOL[:10],
    )
    base.update(kw)
    with pytest.raises(KernelError):
        T.tf_idf_vectorizer(np.array([1, 2], np.int64), **base)


def test_tfidf_string_pool_needs_strings():
    with pytest.raises(KernelError):
        T.tf_idf_vectorizer(
            np.array([1, 2]),
            max_gram_length=1,
            min_gram_length=1,
            max_skip_count=0,
            mode="TF",
            ngram_counts=(0,),
            ngram_indexes=(0,),
            pool_strings=("a",),
        )


# --------------------------------------------------------------------------- StringConcat / Split / Regex
@pytest.mark.parametrize(
    "x, y",
    [
        (S("abc", "def"), S(".com", ".net")),
        (S("cat", "dog"), S("s")),
        (np.array("cat", object), np.array("s", object)),
        (np.array([["a"], ["b"]], object), S("1", "2", "3")),
        (S("的", ""), S("中", "x")),
        (np.array(["ab", "c"]), np.array([b"x", b"y"])),  # numpy U / S inputs
    ],
)
def test_string_concat(x, y):
    z = T.string_concat(x, y)
    xs = np.vectorize(lambda s: s.decode() if isinstance(s, bytes) else str(s), otypes=[object])
    want = np.array(np.char.add(np.array(xs(x), str), np.array(xs(y), str)), dtype=object)
    assert z.dtype == object and z.shape == want.shape and z.tolist() == want.tolist()


def test_string_concat_errors():
    with pytest.raises(KernelError):
        T.string_concat(S("a", "b"), S("a", "b", "c"))
    with pytest.raises(KernelError):
        T.string_concat(S("a"), np.array([1]))
    assert T.string_concat(np.empty((0, 2), object), S("a", "b")).shape == (0, 2)


@pytest.mark.parametrize(
    "x, kw",
    [
        (S("abc.com", "def.net", "x"), {"delimiter": "."}),
        (np.array([["hello world", "def.net"], ["o n n x", "the quick brown fox"]], object), {"maxsplit": 2}),
        (S("o-n-n--x-", "o-n----nx", ""), {"delimiter": "-"}),
        (S("  hello   world ! ", "", "a\tb\nc"), {"delimiter": ""}),
        (S("  hello   world ! ", "a b c d"), {"maxsplit": 1}),
        (S("a::b::c", "::"), {"delimiter": "::", "maxsplit": 1}),
        (S(), {}),
    ],
)
def test_string_split(x, kw):
    y, z = T.string_split(x, **kw)
    sep = kw.get("delimiter") or None
    parts = [s.split(sep, kw.get("maxsplit", -1)) for s in x.reshape(-1)]
    width = max([len(p) for p in parts], default=0)
    want = np.array([p + [""] * (width - len(p)) for p in parts], dtype=object).reshape(x.shape + (width,))
    assert y.dtype == object and y.shape == x.shape + (width,) and y.tolist() == want.tolist()
    assert z.dtype == np.int64 and z.shape == x.shape
    assert z.reshape(-1).tolist() == [len(p) for p in parts]


@pytest.mark.parametrize(
    "pattern, xs",
    [
        (r"\w+@\w+\.com", ["a@b.com", "a@b.com.x", "@b.com", "xy@zz.com"]),
        (r"[a-c]*", ["", "abc", "abd"]),
        (r"(?i)hello", ["HeLLo", "hello!"]),
        (r"a|ab", ["ab", "a", "b"]),
    ],
)
def test_regex_full_match(pattern, xs):
    y = T.regex_full_match(S(*xs).reshape(1, -1), pattern=pattern)
    assert y.dtype == np.bool_ and y.shape == (1, len(xs))
    assert y[0].tolist() == [re.fullmatch(pattern, s) is not None for s in xs]


def test_regex_errors_and_empty():
    with pytest.raises(KernelError):
        T.regex_full_match(S("a"), pattern="(")
    assert T.regex_full_match(np.empty((0, 3), object), pattern="a").shape == (0, 3)
