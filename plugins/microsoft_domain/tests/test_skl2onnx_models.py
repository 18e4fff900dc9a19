"""skl2onnx's text, hashing and cdist models run on onnxkit (cpu and gpu, default options), compared
with onnxruntime and with scikit-learn's own transform / predict (the ground truth).

skl2onnx and onnxruntime are test tools and oracles here.  Where skl2onnx's conversion itself
departs from scikit-learn (its regular expressions read ``\\w`` as ASCII, so non-ASCII words are
lost; char n-grams keep runs of white space that scikit-learn collapses), the scikit-learn
comparison covers the rows the conversion is faithful on and onnxkit must still equal onnxruntime
on every row.  onnxruntime's StringNormalizer needs the en_US.UTF-8 locale (``.ci/run`` generates
it); without it only the onnxruntime comparison of models holding a StringNormalizer is skipped.
"""

from __future__ import annotations

import subprocess
import warnings

import numpy as np
import onnxruntime as ort
import pytest

from onnxkit.runtime import InferenceSession

pytest.importorskip("skl2onnx")
from skl2onnx import to_onnx  # noqa: E402
from skl2onnx.common.data_types import DoubleTensorType, FloatTensorType, StringTensorType  # noqa: E402

CORPUS = ["The quick brown fox jumps over the lazy dog.", "A quick brown dog; a lazy fox!",
          "Héllo wörld, naïve café — déjà vu.", "", "  spaced   out   words  ", "Numbers 123 and 4567 too",
          "UPPER case and lower CASE", "e-mail: someone@example.com (not really)", "tabs\tand\nnewlines",
          "the the the fox", "Ünïcödé ÜBER straße", "数据 科学 and text", "?!.,;:", "don't stop-believing",
          "fox", "Dog dog DOG", "lazy lazy brown", "jumps over", "quick, quick!", "the end"]
NON_ASCII = [i for i, s in enumerate(CORPUS) if not s.isascii()]
GAP_ROWS = [1, 13]
WHITE_RUNS = [i for i, s in enumerate(CORPUS) if "  " in s or "\t" in s or "\n" in s]


def _has_locale() -> bool:
    try:
        out = subprocess.run(["locale", "-a"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return any(x.lower().replace("-", "") == "en_us.utf8" for x in out.split())


HAS_LOCALE = _has_locale()


def _convert(model, types, options=None) -> bytes:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        onx = to_onnx(model, initial_types=types, options=options, target_opset={"": 17, "ai.onnx.ml": 3})
    return onx.SerializeToString()


def _run_all(model: bytes, feed: dict, needs_locale: bool = False) -> dict:
    """Outputs of onnxkit's cpu and gpu backends (and onnxruntime's, unless its locale is absent)."""
    res = {b: InferenceSession(model, b).run(None, feed) for b in ("cpu", "gpu")}
    if HAS_LOCALE or not needs_locale:
        res["onnxruntime"] = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feed)
    return res


def _close(got, want, rows, what, atol=1e-5):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    np.testing.assert_allclose(got[rows], want[rows], rtol=1e-5, atol=atol, err_msg=what)


TEXT_CASES = [
    ("count_word", "CountVectorizer", {}),
    ("count_word_ngram_1_2", "CountVectorizer", {"ngram_range": (1, 2)}),
    ("count_no_lowercase", "CountVectorizer", {"lowercase": False}),
    ("count_stop_words_list", "CountVectorizer", {"stop_words": ["the", "and", "a"]}),
    ("count_stop_words_english", "CountVectorizer", {"stop_words": "english"}),
    ("count_token_pattern_az", "CountVectorizer", {"token_pattern": r"[a-z]+"}),
    ("count_token_pattern_w1", "CountVectorizer", {"token_pattern": r"\b\w+\b", "binary": True}),
    ("tfidf_word", "TfidfVectorizer", {}),
    ("tfidf_word_1_3_cased", "TfidfVectorizer", {"ngram_range": (1, 3), "lowercase": False}),
    ("tfidf_char_1_3", "TfidfVectorizer", {"analyzer": "char", "ngram_range": (1, 3)}),
    ("tfidf_char_2_cased", "TfidfVectorizer", {"analyzer": "char", "ngram_range": (2, 2), "lowercase": False}),
    ("tfidf_l1_no_idf", "TfidfVectorizer", {"norm": "l1", "use_idf": False}),
    ("tfidf_no_norm_binary", "TfidfVectorizer", {"norm": None, "use_idf": False, "binary": True}),
]


@pytest.mark.parametrize("name,cls,kw", TEXT_CASES, ids=[c[0] for c in TEXT_CASES])
def test_text_vectorizer(name, cls, kw):
    from sklearn.feature_extraction import text

    est = getattr(text, cls)(**kw).fit(CORPUS)
    want = est.transform(CORPUS).toarray()
    model = _convert(est, [("X", StringTensorType([None, 1]))])
    res = _run_all(model, {"X": np.array(CORPUS, dtype=object).reshape(-1, 1)}, needs_locale=True)
    # rows where skl2onnx's conversion is faithful to scikit-learn (see the module docstring)
    lost = NON_ASCII if kw.get("analyzer", "word") == "word" else WHITE_RUNS
    if kw.get("analyzer", "word") == "word" and kw.get("ngram_range", (1, 1))[1] > 1:
        lost = lost + GAP_ROWS  # a dropped one-letter word or a cut at "'" changes which words are adjacent
    rows = [i for i in range(len(CORPUS)) if i not in lost]
    for backend in ("cpu", "gpu"):
        _close(res[backend][0], want, rows, f"{name} on {backend} vs scikit-learn")
        if "onnxruntime" in res:
            _close(res[backend][0], res["onnxruntime"][0], slice(None), f"{name} on {backend} vs onnxruntime")
    assert np.asarray(res["cpu"][0]).dtype == np.float32


def test_char_wb_is_refused_by_the_converter():
    """skl2onnx does not convert char_wb (so there is no such model to run): the limit is theirs."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    est = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 3)).fit(CORPUS)
    with pytest.raises(NotImplementedError):
        _convert(est, [("X", StringTensorType([None, 1]))])


@pytest.mark.parametrize("kind", ["KNeighborsClassifier", "KNeighborsRegressor"])
def test_knn_cdist(kind):
    from sklearn import neighbors

    rng = np.random.default_rng(3)
    X = rng.standard_normal((40, 4)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] > 0).astype(np.int64) if kind.endswith("Classifier") else X[:, 0] * 2 + X[:, 2]
    est = getattr(neighbors, kind)(n_neighbors=3).fit(X, y)
    opts = {id(est): {"optim": "cdist", "zipmap": False}} if kind.endswith("Classifier") else \
        {id(est): {"optim": "cdist"}}
    model = _convert(est, [("X", FloatTensorType([None, 4]))], opts)
    assert b"CDist" in model
    Xt = rng.standard_normal((10, 4)).astype(np.float32)
    res = _run_all(model, {"X": Xt})
    for backend, out in res.items():
        _close(np.ravel(out[0]), np.ravel(est.predict(Xt)), slice(None), f"{kind} on {backend} vs scikit-learn",
               atol=1e-4)


HASH_ROWS = [["dog", "cat", "fox"], ["a", "b", "c"], ["Héllo", "wörld", "数据"], ["", "x", "longer string here"],
             ["dog", "dog", "dog"], ["the quick", "brown fox", "jumps"]]


@pytest.mark.parametrize("n_features", [8, 2**20])
@pytest.mark.parametrize("alternate_sign", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("columns", [1, 3])
def test_feature_hasher_strings(n_features, alternate_sign, dtype, columns):
    """skl2onnx's FeatureHasher (input_type 'string'): MurmurHash3 with positive=0, then the sign and the
    modulo in ai.onnx, equal to scikit-learn's transform and to onnxruntime, on both backends."""
    from sklearn.feature_extraction import FeatureHasher

    rows = [r[:columns] for r in HASH_ROWS]
    est = FeatureHasher(n_features=n_features, input_type="string", alternate_sign=alternate_sign, dtype=dtype)
    want = est.fit(rows).transform(rows).toarray()
    model = _convert(est, [("X", StringTensorType([None, columns]))])
    assert b"MurmurHash3" in model
    res = _run_all(model, {"X": np.array(rows, dtype=object)})
    for backend, out in res.items():
        got = np.asarray(out[0])
        assert got.dtype == dtype and got.shape == (len(rows), n_features), (backend, got.dtype, got.shape)
        np.testing.assert_array_equal(got, want, err_msg=f"FeatureHasher on {backend} vs scikit-learn")
        np.testing.assert_array_equal(got, res["onnxruntime"][0], err_msg=f"FeatureHasher on {backend} vs onnxruntime")


def test_feature_hasher_int32_follows_the_conversion_as_onnxruntime_does():
    """For an int32 dtype skl2onnx's graph writes int64 with 2**32 - 1 for a negative sign (its conversion
    departs from scikit-learn there): onnxkit computes what the graph says, as onnxruntime does."""
    from sklearn.feature_extraction import FeatureHasher

    rows = [r[:2] for r in HASH_ROWS]
    est = FeatureHasher(n_features=16, input_type="string", dtype=np.int32).fit(rows)
    model = _convert(est, [("X", StringTensorType([None, 2]))])
    res = _run_all(model, {"X": np.array(rows, dtype=object)})
    assert res["onnxruntime"][0].dtype == np.int64
    assert (res["onnxruntime"][0] == 2**32 - 1).any()  # a negative sign, as the graph writes it
    for backend in ("cpu", "gpu"):
        np.testing.assert_array_equal(res[backend][0], res["onnxruntime"][0], err_msg=backend)


def test_feature_hasher_pair_input_is_refused_by_the_converter():
    """skl2onnx converts input_type 'string' only (there is no 'pair' / 'dict' model to run): its limit."""
    from sklearn.feature_extraction import FeatureHasher

    est = FeatureHasher(n_features=8, input_type="pair").fit([[("a", 1.0)]])
    with pytest.raises(RuntimeError, match="only supports input_type='string'"):
        _convert(est, [("X", StringTensorType([None, 1]))])
