"""Beam search of onnxkit.genai against the real onnxruntime_genai 0.18.0 on the same genai-built
model: the same steps, the same returned sequences (num_return_sequences, a padded batch,
length_penalty without early stopping, a repetition penalty) and the same last tokens, with
the model's end-of-sequence never reached and with one that closes hypotheses early."""

from __future__ import annotations

import numpy as np
import pytest

import genai_bpe_model

PROMPT = "The quick brown fox"
OPTIONS = [
    (1, dict(max_length=30, num_beams=2)),
    (1, dict(max_length=30, num_beams=4, num_return_sequences=3)),
    (1, dict(max_length=30, num_beams=3, length_penalty=0.5, early_stopping=False)),
    (2, dict(max_length=30, num_beams=2, batch_size=2, num_return_sequences=2)),
    (1, dict(max_length=36, num_beams=3, repetition_penalty=1.3, min_length=24)),
]


def _beam(og, folder, rows: int, options: dict) -> tuple:
    model = og.Model(str(folder))
    tokenizer = og.Tokenizer(model)
    params = og.GeneratorParams(model)
    params.set_search_options(**options)
    gen = og.Generator(model, params)
    gen.append_tokens(tokenizer.encode_batch([PROMPT, "Hello world"][:rows]) if rows > 1 else tokenizer.encode(PROMPT))
    steps = 0
    while not gen.is_done():
        gen.generate_next_token()
        steps += 1
    count = rows * options.get("num_return_sequences", 1)
    return steps, [gen.get_sequence(i).tolist() for i in range(count)], gen.get_next_tokens().tolist()


@pytest.fixture(scope="module")
def eos_folder(tmp_path_factory, bpe_model, real_og):
    """The model with an end of sequence its 4-beam search meets early: the best beam's fifth token."""
    prompt = real_og.Tokenizer(real_og.Model(str(bpe_model))).encode(PROMPT)
    _, sequences, _ = _beam(real_og, bpe_model, 1, dict(max_length=30, num_beams=4))
    eos = sequences[0][len(prompt) + 4]
    return genai_bpe_model.variant(bpe_model, tmp_path_factory.mktemp("beam-eos"), model={"eos_token_id": eos})


@pytest.mark.parametrize("rows, options", OPTIONS, ids=[str(o) for _, o in OPTIONS])
def test_beam_search_equals_the_real_package(bpe_model, eos_folder, real_og, kit_og, rows, options):
    for folder in (bpe_model, eos_folder):
        want = _beam(real_og, folder, rows, options)
        assert _beam(kit_og, folder, rows, options) == want, folder.name
    # with the early end of sequence, hypotheses close before max_length (min_length holds it off)
    assert any(len(s) < options["max_length"] for s in want[1]) != bool(options.get("min_length"))


def test_beam_search_refusals(bpe_model, real_og, kit_og):
    for og in (real_og, kit_og):
        model = og.Model(str(bpe_model))
        params = og.GeneratorParams(model)
        params.set_search_options(num_beams=2, do_sample=True, top_k=5, max_length=20)
        with pytest.raises(RuntimeError, match="beam search"):
            og.Generator(model, params)
        params = og.GeneratorParams(model)
        params.set_search_options(num_beams=2, num_return_sequences=3, max_length=20)
        with pytest.raises(RuntimeError, match="num_return_sequences"):
            og.Generator(model, params)
        params = og.GeneratorParams(model)
        params.set_search_options(num_beams=2, max_length=20)
        gen = og.Generator(model, params)
        gen.append_tokens(np.array([5, 6, 7], np.int32))
        gen.generate_next_token()
        with pytest.raises(RuntimeError, match="beam search"):
            gen.rewind_to(3)
