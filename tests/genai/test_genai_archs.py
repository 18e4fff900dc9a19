"""onnxkit.genai's Generator on the decoders tests/generative/genai_models.py builds (llama, qwen2,
phi3, gemma; fp32, and int4 for three): the same greedy tokens as the real onnxruntime_genai
0.18.0, token ids in and out (those folders' word-level tokenizer is not one onnxruntime-genai's
tokenizer reads, so no text is involved), both caches; gemma2, qwen3, phi and mistral (a
sliding window) with the shared one; the builder's quantized KV caches; and the fp16 DirectML
build (position_ids fed, a float16 cache), run on the CPU by both."""

from __future__ import annotations

import numpy as np
import pytest

import genai_models

PROMPT = np.array([1, 5, 9, 17, 33, 60, 7], np.int32)
CASES = [(arch, "fp32", share, 48) for arch in ("llama", "qwen2", "phi3", "gemma") for share in (True, False)] + [
    (arch, "fp32", True, 48) for arch in ("gemma2", "qwen3", "phi", "mistral")] + [
    ("llama", "int4", True, 48), ("phi3", "int4", True, 48), ("qwen3", "int4", True, 48)]
#: the builder's quantized KV caches (a head's values packed into uint8 / int8)
SCHEMES = ("int4_per_tensor", "int8_per_tensor")


def _greedy(og, folder, share: bool, new: int) -> list:
    model = og.Model(str(folder))
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(PROMPT) + new, past_present_share_buffer=share)
    gen = og.Generator(model, params)
    gen.append_tokens(PROMPT)
    while not gen.is_done():
        gen.generate_next_token()
    return gen.get_sequence(0).tolist()


def _open(og, folder):
    config = og.Config(str(folder))
    config.clear_providers()  # the dml build names DirectML; both packages run it on the CPU
    return og.Model(config)


@pytest.mark.parametrize("rows", [1, 2], ids=["one-row", "padded-batch"])
def test_position_ids_and_a_float16_cache_equal_the_real_package(real_og, kit_og, rows):
    """The builder's fp16 DirectML Llama takes position_ids (RoPE outside GroupQueryAttention) and
    keeps a float16 cache: run on the CPU by both packages, the same greedy tokens."""
    folder = genai_models.build("llama", "fp16", ep="dml")
    prompt = np.array([[1, 5, 9, 17, 33, 60, 7], [1, 7, 8, 2, 2, 2, 2]][:rows], np.int32)  # pad_token_id 2
    out = []
    for og in (real_og, kit_og):
        model = _open(og, folder)
        params = og.GeneratorParams(model)
        params.set_search_options(max_length=prompt.shape[1] + 32, batch_size=rows)
        gen = og.Generator(model, params)
        gen.append_tokens(prompt)
        while not gen.is_done():
            gen.generate_next_token()
        out.append([gen.get_sequence(i).tolist() for i in range(rows)])
    inputs = {i.name: i.type for i in _open(kit_og, folder)._session.get_inputs()}
    assert "position_ids" in inputs and inputs["past_key_values.0.key"] == "tensor(float16)"
    assert out[1] == out[0] and len(out[0][0]) > prompt.shape[1] + 8


@pytest.mark.parametrize("arch, precision, share, new", CASES,
                         ids=[f"{a}-{p}-{'shared' if s else 'growing'}" for a, p, s, _ in CASES])
def test_greedy_tokens_equal_the_real_package(real_og, kit_og, arch, precision, share, new):
    folder = genai_models.build(arch, precision)
    want = _greedy(real_og, folder, share, new)
    assert len(want) >= len(PROMPT) + 8  # an end-of-sequence may come before max_length
    assert _greedy(kit_og, folder, share, new) == want


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_quantized_cache_equals_the_real_package(real_og, kit_og, scheme):
    """kv_cache_quant_scheme: the past inputs declare the packed width (head_size / 2 bytes for
    int4); onnxkit.genai sizes its cache by them."""
    folder = genai_models.build("qwen2", "fp32", extra={"kv_cache_quant_scheme": scheme})
    want = _greedy(real_og, folder, False, 32)
    assert len(want) >= len(PROMPT) + 16
    assert _greedy(kit_og, folder, False, 32) == want
