"""onnxruntime-genai's model builder's decoders (tests/generative/genai_models.py: llama, qwen2, phi3,
mistral, gemma, gemma2, qwen3, phi; fp32 and int4 for the CPU) run on onnxkit's InferenceSession:
greedy decoding of 56 new tokens after a 7-token prompt, driven by ``session.run`` the way
genai_config.json describes the model (input_ids, attention_mask over every token so far,
past_key_values.%d.key/value fed back from present.%d.key/value), gives the tokens onnxruntime
1.32 gives on the same loop.

The loop keeps the KV cache as onnxruntime-genai does (``past_present_share_buffer``: a past buffer
of the whole context's length, the present returned in its place), or grows it (a past of the
tokens so far; :func:`test_growing_cache`); a sliding-window layer keeps a window-sized buffer
(genai_config's ``sliding_window``: GroupQueryAttention's ``sliding_window_cache``).  fp32 logits
agree closely at every step; int4 models (MatMulNBits, accuracy_level 4: onnxruntime quantizes the
activations to int8 there) agree within the quantization's error and in every greedy choice.
Also: the builder's fp16 DirectML form (separate RotaryEmbedding nodes) and its quantized KV
caches.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from genai_models import ARCHS, PRECISIONS, build, genai_config

ort = pytest.importorskip("onnxruntime")

PROMPT = [5, 17, 33, 9, 61, 42, 7]
NEW_TOKENS = 56


def greedy(run, cfg: dict, prompt=PROMPT, new: int = NEW_TOKENS, shared: bool = True, cache=np.float32):
    """(the new tokens, the logits of the last position at each step) of greedy decoding with
    ``run(feed) -> [logits, present.0.key, present.0.value, ...]``; ``cache`` the KV cache's element
    type (int8, or uint8 for a 4-bit cache: two values a byte)."""
    dec = cfg["model"]["decoder"]
    layers, nkv, h = dec["num_hidden_layers"], dec["num_key_value_heads"], dec["head_size"]
    names = dec["inputs"]
    length = min(cfg["search"]["max_length"], len(prompt) + new) if shared else 0
    window = dec.get("sliding_window") or {}
    past = {}
    for i in range(layers):
        # a sliding-window layer keeps a window-sized buffer (sliding_window_cache) either way
        cap = window["window_size"] + window.get("cache_slack", 0) if i in window.get("layers", ()) else length
        for kind in ("key", "value"):
            past[names[f"past_{kind}_names"] % i] = np.zeros((1, nkv, cap, h // 2 if cache == np.uint8 else h), cache)
    tokens, logits_seen = list(prompt), []
    ids = np.array([prompt], np.int64)
    for _ in range(new):
        feed = {names["input_ids"]: ids, names["attention_mask"]: np.ones((1, len(tokens)), np.int64), **past}
        outs = run(feed)
        last = np.asarray(outs[0])[0, -1]
        logits_seen.append(last)
        tokens.append(int(np.argmax(last)))
        ids = np.array([[tokens[-1]]], np.int64)
        for i in range(layers):
            past[names["past_key_names"] % i] = outs[1 + 2 * i]
            past[names["past_value_names"] % i] = outs[2 + 2 * i]
    return tokens[len(prompt):], np.stack(logits_seen)


def output_names(cfg: dict) -> list:
    dec = cfg["model"]["decoder"]
    outs = dec["outputs"]
    return [outs["logits"]] + [outs[f"present_{k}_names"] % i for i in range(dec["num_hidden_layers"])
                                for k in ("key", "value")]


def both(arch: str, precision: str, shared=None, extra=None):
    """(onnxruntime's tokens and logits, onnxkit's) for one built model."""
    from onnxkit.runtime import InferenceSession

    folder = build(arch, precision, extra=extra)
    cfg = genai_config(folder)
    if shared is None:  # as genai_config.json says
        shared = cfg["search"]["past_present_share_buffer"]
    names = output_names(cfg)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    ref = ort.InferenceSession(str(folder / "model.onnx"), so, providers=["CPUExecutionProvider"])
    kind = next(i.type for i in ref.get_inputs() if i.name.startswith("past_key_values"))
    cache = {"tensor(float)": np.float32, "tensor(int8)": np.int8, "tensor(uint8)": np.uint8}[kind]
    want = greedy(lambda feed: ref.run(names, feed), cfg, shared=shared, cache=cache)
    with warnings.catch_warnings():
        # the model declares present's length total_sequence_length; with a shared buffer it is the
        # buffer's (the conformance warning says so), as onnxruntime-genai runs it
        warnings.simplefilter("ignore")
        sess = InferenceSession(str(folder / "model.onnx"))
        got = greedy(lambda feed: sess.run(names, feed), cfg, shared=shared, cache=cache)
    return want, got


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_greedy_tokens_equal_onnxruntime(arch, precision):
    assert genai_config(build(arch, precision))["search"]["past_present_share_buffer"] is True
    (want_tokens, want_logits), (got_tokens, got_logits) = both(arch, precision)
    assert len(got_tokens) == NEW_TOKENS >= 48
    assert len(set(want_tokens)) > 5, "a degenerate model: greedy decoding repeats one token"
    assert got_tokens == want_tokens
    if precision == "fp32":
        np.testing.assert_allclose(got_logits, want_logits, rtol=1e-3, atol=1e-3)
    else:
        # accuracy_level 4: onnxruntime quantizes MatMulNBits' activations to int8 (measured: 0.4%
        # of the logits' range apart; test_int4_at_accuracy_level_1: 3e-6 without that step)
        spread = np.abs(want_logits).max()
        assert np.abs(got_logits - want_logits).max() < 0.02 * spread


@pytest.mark.parametrize("arch", ["qwen2", "mistral"])
def test_growing_cache(arch):
    """The past holding only the tokens so far (no shared buffer): present grows by one a step."""
    (want_tokens, want_logits), (got_tokens, got_logits) = both(arch, "fp32", shared=False)
    assert got_tokens == want_tokens
    np.testing.assert_allclose(got_logits, want_logits, rtol=1e-3, atol=1e-3)


def test_int4_at_accuracy_level_1():
    """The builder's int4 model with accuracy_level 1 (MatMulNBits in float32 on onnxruntime too):
    the logits agree as fp32's do."""
    (want_tokens, want_logits), (got_tokens, got_logits) = both("llama", "int4", extra={"accuracy_level": 1})
    assert got_tokens == want_tokens
    np.testing.assert_allclose(got_logits, want_logits, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("scheme", ["int8_per_tensor", "int8_per_channel", "int4_per_tensor"])
def test_quantized_kv_cache(scheme):
    """The builder's quantized KV cache (kv_cache_quant_scheme, static scales from a file):
    GroupQueryAttention keeps int8 / 4-bit keys and values (genai_config.json: no shared buffer, the
    cache grows); the tokens and logits agree."""
    folder = build("qwen2", "fp32", extra={"kv_cache_quant_scheme": scheme})
    so = ort.SessionOptions()
    so.log_severity_level = 3
    kinds = {i.type for i in ort.InferenceSession(str(folder / "model.onnx"), so).get_inputs()
             if i.name.startswith("past_key_values")}
    assert kinds == {"tensor(int8)" if scheme.startswith("int8") else "tensor(uint8)"}
    (want_tokens, want_logits), (got_tokens, got_logits) = both("qwen2", "fp32",
                                                                extra={"kv_cache_quant_scheme": scheme})
    assert len(set(want_tokens)) > 5 and got_tokens == want_tokens
    np.testing.assert_allclose(got_logits, want_logits, rtol=1e-3, atol=1e-3)


def test_every_architecture_builds():
    """genai_models.UNBUILDABLE lists none: the builder builds all five here."""
    from genai_models import UNBUILDABLE

    assert UNBUILDABLE == {}
    assert genai_config(build("mistral", "fp32"))["model"]["decoder"]["sliding_window"]["layers"] == [0]
    for arch in ARCHS:
        for precision in PRECISIONS:
            folder = build(arch, precision)
            assert (folder / "model.onnx").exists() and (folder / "tokenizer.json").exists()
            model = (folder / "model.onnx").read_bytes()
            assert b"GroupQueryAttention" in model
            assert (b"MatMulNBits" in model) == (precision == "int4")


def test_separate_rotary_embedding_form():
    """The builder's fp16 model for DirectML keeps RoPE out of GroupQueryAttention: RotaryEmbedding
    nodes (3-D input, position_ids (B, S)) before an unpacked, float16 GroupQueryAttention.
    onnxruntime's CPU provider runs it; onnxkit gives its tokens."""
    from onnxkit.runtime import InferenceSession

    folder = build("llama", "fp16", ep="dml")
    model = (folder / "model.onnx").read_bytes()
    assert b"RotaryEmbedding" in model and b"position_ids" in model
    cfg = genai_config(folder)
    dec = cfg["model"]["decoder"]
    names = output_names(cfg)

    def greedy16(run):
        tokens = list(PROMPT)
        ids = np.array([tokens], np.int64)
        past = {dec["inputs"][f"past_{k}_names"] % i: np.zeros((1, dec["num_key_value_heads"], 64, dec["head_size"]),
                                                                np.float16)
                for i in range(dec["num_hidden_layers"]) for k in ("key", "value")}
        for _ in range(NEW_TOKENS):
            pos = np.arange(len(tokens) - ids.shape[1], len(tokens))[None].astype(np.int64)
            outs = run({"input_ids": ids, "attention_mask": np.ones((1, len(tokens)), np.int64), "position_ids": pos,
                        **past})
            tokens.append(int(np.argmax(outs[0][0, -1])))
            ids = np.array([[tokens[-1]]], np.int64)
            for i in range(dec["num_hidden_layers"]):
                past[dec["inputs"]["past_key_names"] % i] = outs[1 + 2 * i]
                past[dec["inputs"]["past_value_names"] % i] = outs[2 + 2 * i]
        return tokens[len(PROMPT):]

    so = ort.SessionOptions()
    so.log_severity_level = 3
    ref = ort.InferenceSession(str(folder / "model.onnx"), so, providers=["CPUExecutionProvider"])
    want = greedy16(lambda feed: ref.run(names, feed))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sess = InferenceSession(str(folder / "model.onnx"))
        got = greedy16(lambda feed: sess.run(names, feed))
    assert len(set(want)) > 5 and got == want


def test_batch_of_two_right_padded():
    """Two prompts of 7 and 4 tokens in one batch, the shorter padded on the right (attention_mask 0
    there, as onnxruntime-genai pads): GroupQueryAttention's seqlens_k puts each row's new keys
    after its own tokens; each row's greedy tokens equal onnxruntime's."""
    from onnxkit.runtime import InferenceSession

    folder = build("llama", "fp32")
    cfg = genai_config(folder)
    dec = cfg["model"]["decoder"]
    names, pad = output_names(cfg), cfg["model"]["pad_token_id"]

    def greedy2(run, new=24):
        ids = np.array([PROMPT, PROMPT[:4] + [pad] * 3], np.int64)
        mask = np.array([[1] * 7, [1] * 4 + [0] * 3], np.int64)
        past = {dec["inputs"][f"past_{k}_names"] % i: np.zeros((2, dec["num_key_value_heads"], 40, dec["head_size"]),
                                                                np.float32)
                for i in range(dec["num_hidden_layers"]) for k in ("key", "value")}
        last, out = np.array([6, 3]), []
        for _ in range(new):
            outs = run({"input_ids": ids, "attention_mask": mask, **past})
            logits = np.asarray(outs[0])
            nxt = logits[np.arange(2), last if logits.shape[1] > 1 else 0].argmax(-1)
            out.append(nxt.tolist())
            ids, last = nxt[:, None].astype(np.int64), None
            mask = np.concatenate([mask, np.ones((2, 1), np.int64)], axis=1)
            for i in range(dec["num_hidden_layers"]):
                past[dec["inputs"]["past_key_names"] % i] = outs[1 + 2 * i]
                past[dec["inputs"]["past_value_names"] % i] = outs[2 + 2 * i]
        return np.array(out)

    so = ort.SessionOptions()
    so.log_severity_level = 3
    ref = ort.InferenceSession(str(folder / "model.onnx"), so, providers=["CPUExecutionProvider"])
    want = greedy2(lambda feed: ref.run(names, feed))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sess = InferenceSession(str(folder / "model.onnx"))
        got = greedy2(lambda feed: sess.run(names, feed))
    np.testing.assert_array_equal(got, want)
    # and each row is what it decodes to alone (the padding changes nothing)
    single = [greedy(lambda feed: ref.run(names, feed), cfg, prompt=p, new=24)[0] for p in (PROMPT, PROMPT[:4])]
    np.testing.assert_array_equal(want.T, np.array(single))
