"""The real-world corpus: every model run with onnxkit's defaults and compared with onnxruntime.

The corpus is built into ``.cache/corpus/`` on first use (``build.ensure_corpus``; a few
minutes, then reused).  Each model's expected outcome is one line of ``expected.toml``:
``"match"``, ``"unsupported: <domain::op>, ..."``, ``"refused: <text>"`` or ``"mismatch: <text>"``
(see ``corpus_outcome``).  The test asserts each model's outcome is exactly its expected one
and that the counts of outcomes are the ones the docs' corpus page (docs/corpus.md) states.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

from corpus_outcome import agrees, counts, run_model  # noqa: E402

EXPECTED: dict[str, str] = tomllib.loads((HERE / "expected.toml").read_text())["models"]
# docs/corpus.md states these figures, and the README the model and producer counts; a change to
# expected.toml changes them.
MODELS, PRODUCERS = 50, 13
COUNTS = {"match": 50, "mismatch": 0, "unsupported": 0, "refused": 0, "crash": 0}
README_LINE = (f"{MODELS} models from {PRODUCERS} producers: "
               + ", ".join(f"{n} {kind}" for kind, n in COUNTS.items()) + ".")


@pytest.fixture(scope="module")
def corpus():
    """(folder, manifest entries by name) of the built corpus."""
    from corpus_cache import ensure_corpus

    out, manifest = ensure_corpus(log=lambda line: print(line, file=sys.stderr))
    return out, {m["name"]: m for m in manifest["models"]}


def test_manifest_lists_the_expected_models(corpus):
    out, models = corpus
    assert list(models) == list(EXPECTED)
    assert len(models) == MODELS
    assert len({m["producer"].split(" (in ")[0] for m in models.values()}) == PRODUCERS  # "X (in pkg)" is X
    for m in models.values():
        path = out / m["file"]
        assert path.stat().st_size == m["size"] > 0
        assert m["producer_version"] and m["inputs"], m["name"]


def test_expected_counts_are_the_documented_figures():
    assert len(EXPECTED) == MODELS
    assert counts(EXPECTED.values()) == COUNTS
    assert README_LINE in (HERE.parent.parent / "docs" / "corpus.md").read_text()
    assert f"runs {MODELS} models from {PRODUCERS} producers" in (HERE.parent.parent / "README.md").read_text()


@pytest.mark.parametrize("name", list(EXPECTED))
def test_model(corpus, name):
    from corpus_cache import load_inputs

    out, models = corpus
    outcome = run_model(out / models[name]["file"], load_inputs(out, name))
    assert agrees(outcome, EXPECTED[name]), (
        f"{name}: expected {EXPECTED[name]!r}, got {outcome.label()!r}\n{outcome.message[:2000]}")
    if outcome.kind == "unsupported":  # reported at session creation, naming every operator
        for op in outcome.detail.split(", "):
            assert op in outcome.message


#: Models that carry a violation of a SHALL that cannot change their result: they run by default
#: (above) and ``strict=True`` refuses each, naming the checker code (Clause 8.6 to the letter).
STRICT_REFUSALS = {
    "silero_vad": "type-kind-missing",
    "silero_vad_16k_op15": "type-kind-missing",
    "silero_vad_half": "type-kind-missing",
    "silero_vad_openvino_16k": "duplicate-node-name",
    "rapidocr_cls_v2": "negative-dim-value",
    "skl_decision_tree_2t": "inferred-shape-mismatch",
}


@pytest.mark.parametrize("name", sorted(STRICT_REFUSALS))
def test_strict_refuses_a_model_carrying_a_violation_naming_it(corpus, name):
    import onnxkit

    out, models = corpus
    with pytest.raises(onnxkit.ValidationError) as refused:
        onnxkit.InferenceSession(str(out / models[name]["file"]), strict=True)
    assert STRICT_REFUSALS[name] in {d.code for d in refused.value.diagnostics}
