"""Plans that serve a growing KV cache (onnxkit.runtime.optimizer.specialize.ShapeClasses).

A Llama decoder exported by torch from a transformers configuration (random weights) decodes
greedily: every token feeds a past one longer than the last.  The planning work per new token is
counted (whole-graph inference and folding calls), not timed: after the first few tokens a new
extent costs no planning at all, under the default first-run policy and under ``warm``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")
ort = pytest.importorskip("onnxruntime")

import onnxkit  # noqa: E402
import onnxkit.inference  # noqa: E402
from onnxkit.runtime.optimizer import specialize  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from decoder import Decoder, export_llama  # noqa: E402

TOKENS = 40


@pytest.fixture(scope="module")
def llama(tmp_path_factory) -> Path:
    return export_llama(tmp_path_factory.mktemp("decoder") / "llama_tiny.onnx", "tiny")


def _counting(monkeypatch) -> dict:
    calls = {"infer": 0, "fold": 0}
    real_infer, real_fold = onnxkit.inference.infer_model, specialize.Specializer._fold

    def infer(*args, **kwargs):
        calls["infer"] += 1
        return real_infer(*args, **kwargs)

    def fold(self, rec):
        calls["fold"] += 1
        return real_fold(self, rec)

    monkeypatch.setattr(onnxkit.inference, "infer_model", infer)
    monkeypatch.setattr(specialize.Specializer, "_fold", fold)
    return calls


def test_planning_per_token_stops_once_the_cache_axis_varies(llama, first_run_policy, monkeypatch):
    sess = onnxkit.InferenceSession(str(llama))
    if first_run_policy == "tiered":  # a fresh process's cold plan, promoted as a long generation would be
        sess._plans.promote()
    calls = _counting(monkeypatch)
    decoder = Decoder(sess)
    per_token = []
    for _ in range(TOKENS):
        before = dict(calls)
        decoder.step()
        per_token.append((calls["infer"] - before["infer"], calls["fold"] - before["fold"]))
    spec = sess._specializer
    # prompt (its own plan), token 1 and token 2 (the past's third extent: it varies), then nothing
    assert all(p == (0, 0) for p in per_token[3:]), per_token
    assert spec.planned == 3 and len(spec._plans) == 3
    assert {axis for _, axis in spec.classes.varying} == {1, 2}  # the mask's length and the past's
    assert all(axis != 1 or position != 0 for position, axis in spec.classes.varying)  # input_ids: 8 then 1 only


def test_tokens_and_logits_equal_onnxruntime(llama, first_run_policy):
    mine = Decoder(onnxkit.InferenceSession(str(llama)))
    theirs = Decoder(ort.InferenceSession(str(llama), providers=["CPUExecutionProvider"]))
    for _ in range(TOKENS):
        mine.step()
        theirs.step()
        np.testing.assert_allclose(mine.feed["past.1.value"], theirs.feed["past.1.value"], rtol=1e-4, atol=1e-5)
    assert mine.tokens == theirs.tokens


def test_a_new_prompt_length_after_decoding_reuses_the_class_plan(llama, monkeypatch):
    monkeypatch.setenv("ONNXKIT_FIRST_RUN", "warm")
    sess = onnxkit.InferenceSession(str(llama))
    reference = ort.InferenceSession(str(llama), providers=["CPUExecutionProvider"])
    decoder = Decoder(sess)
    for _ in range(6):
        decoder.step()
    planned = sess._specializer.planned
    for n in (3, 5, 11):  # new prompt lengths: input_ids' sequence axis varies at the third
        feed = dict(decoder.feed)
        feed["input_ids"] = np.arange(n, dtype=np.int64).reshape(1, n) % 200
        feed["attention_mask"] = np.ones((1, decoder.total - 1 + n), np.int64)
        got, want = sess.run(None, feed), reference.run(None, feed)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    assert sess._specializer.planned <= planned + 2
