"""onnxkit.genai's Generator against the real onnxruntime_genai 0.18.0 on the same genai-built model:
the same tokens greedily (shared and growing caches, a padded batch, chunked prefill, rewinds,
penalties), the search options honoured (top_k=1 and a tiny nucleus are greedy, max_length and
end-of-sequence stop), and the same refusals."""

from __future__ import annotations

import numpy as np
import pytest

import genai_bpe_model
from onnxkit.genai import GenaiError, GenaiNotSupported

PROMPT = "The quick brown fox jumps over"
NEW = 64


def _generate(og, folder, prompt_ids, new=NEW, **options):
    model = og.Model(str(folder))
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(prompt_ids) + new, **options)
    gen = og.Generator(model, params)
    gen.append_tokens(prompt_ids)
    while not gen.is_done():
        gen.generate_next_token()
    return gen


@pytest.fixture(scope="module")
def prompt_ids(bpe_model, real_og):
    return real_og.Tokenizer(real_og.Model(str(bpe_model))).encode(PROMPT)


@pytest.mark.parametrize("share", [True, False], ids=["shared-cache", "growing-cache"])
def test_greedy_tokens_equal_the_real_package(bpe_model, real_og, kit_og, prompt_ids, share):
    real = _generate(real_og, bpe_model, prompt_ids, past_present_share_buffer=share)
    kit = _generate(kit_og, bpe_model, prompt_ids, past_present_share_buffer=share)
    want = real.get_sequence(0)
    assert len(want) == len(prompt_ids) + NEW and len(set(want[len(prompt_ids):].tolist())) > 3
    np.testing.assert_array_equal(kit.get_sequence(0), want)
    assert kit.get_sequence(0).dtype == np.int32 and kit.token_count() == len(want)
    for name in ("logits", "present.0.key", "present.1.value"):
        assert kit.get_output(name).shape == real.get_output(name).shape, name
    np.testing.assert_allclose(kit.get_output("logits"), real.get_output("logits"), rtol=1e-3, atol=1e-3)


def test_a_padded_batch_equals_the_real_package(bpe_model, real_og, kit_og):
    prompts = ["Hello world", "The first 4 digits of pi are"]
    out = {}
    for og in (real_og, kit_og):
        model = og.Model(str(bpe_model))
        tokens = og.Tokenizer(model).encode_batch(prompts)
        params = og.GeneratorParams(model)
        params.set_search_options(max_length=tokens.shape()[1] + 24, batch_size=2)
        gen = og.Generator(model, params)
        gen.append_tokens(tokens)
        while not gen.is_done():
            gen.generate_next_token()
        out[og] = [gen.get_sequence(i) for i in range(2)]
    for want, got in zip(out[real_og], out[kit_og]):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("options", [dict(do_sample=True, top_k=1, random_seed=3),
                                     dict(do_sample=True, top_k=0, top_p=0.001, random_seed=3),
                                     dict(do_sample=True, temperature=0.0)],
                         ids=["top_k=1", "tiny-nucleus", "temperature=0"])
def test_sampling_that_can_keep_only_the_best_token_is_greedy(bpe_model, real_og, kit_og, prompt_ids, options):
    greedy = _generate(real_og, bpe_model, prompt_ids, new=24).get_sequence(0)
    np.testing.assert_array_equal(_generate(real_og, bpe_model, prompt_ids, new=24, **options).get_sequence(0), greedy)
    np.testing.assert_array_equal(_generate(kit_og, bpe_model, prompt_ids, new=24, **options).get_sequence(0), greedy)


def test_sampling_draws_among_the_top_k_and_a_seed_repeats_it(bpe_model, kit_og, prompt_ids):
    options = dict(do_sample=True, top_k=5, temperature=2.0, random_seed=11)
    model = kit_og.Model(str(bpe_model))
    runs = []
    for _ in range(2):
        params = kit_og.GeneratorParams(model)
        params.set_search_options(max_length=len(prompt_ids) + 32, **options)
        gen = kit_og.Generator(model, params)
        gen.append_tokens(prompt_ids)
        while not gen.is_done():
            top5 = np.argsort(-gen.get_logits().reshape(-1))[:5]
            gen.generate_next_token()
            assert gen.get_next_tokens()[0] in top5
        runs.append(gen.get_sequence(0))
    np.testing.assert_array_equal(runs[0], runs[1])
    greedy = _generate(kit_og, bpe_model, prompt_ids, new=32).get_sequence(0)
    assert not np.array_equal(runs[0], greedy)  # temperature 2 over five tokens: 32 draws all best is ~1e-10


@pytest.mark.parametrize("options", [dict(repetition_penalty=1.5), dict(no_repeat_ngram_size=2),
                                     dict(min_length=40, repetition_penalty=0.8)],
                         ids=["repetition_penalty", "no_repeat_ngram_size", "min_length"])
def test_penalties_equal_the_real_package(bpe_model, real_og, kit_og, prompt_ids, options):
    want = _generate(real_og, bpe_model, prompt_ids, new=48, **options).get_sequence(0)
    assert not np.array_equal(want, _generate(real_og, bpe_model, prompt_ids, new=48).get_sequence(0))
    np.testing.assert_array_equal(_generate(kit_og, bpe_model, prompt_ids, new=48, **options).get_sequence(0), want)


def test_max_length_stops_and_a_step_past_it_is_refused(bpe_model, real_og, kit_og, prompt_ids):
    for og in (real_og, kit_og):
        gen = _generate(og, bpe_model, prompt_ids, new=7)
        assert gen.is_done() and len(gen.get_sequence(0)) == len(prompt_ids) + 7
        with pytest.raises(RuntimeError, match="max_length"):
            gen.generate_next_token()


def test_end_of_sequence_stops_as_in_the_real_package(tmp_path, bpe_model, real_og, kit_og, prompt_ids):
    free = _generate(real_og, bpe_model, prompt_ids, new=40).get_sequence(0)[len(prompt_ids):].tolist()
    step = next(i for i, t in enumerate(free) if i >= 12 and t not in free[:i])
    folder = genai_bpe_model.variant(bpe_model, tmp_path / "eos", model={"eos_token_id": [free[step], 399]})
    results = []
    for og in (real_og, kit_og):
        gen = _generate(og, folder, prompt_ids, new=40)
        assert gen.is_done()
        results.append((gen.get_sequence(0).tolist(), gen.get_next_tokens().tolist()))
    assert results[1] == results[0]
    assert results[0][0] == list(prompt_ids) + free[:step] and results[0][1] == [free[step]]


def test_chunked_prefill_and_rewinds_equal_the_real_package(bpe_model, real_og, kit_og, prompt_ids):
    out = {}
    for og in (real_og, kit_og):
        model = og.Model(str(bpe_model))
        params = og.GeneratorParams(model)
        params.set_search_options(max_length=len(prompt_ids) + 40, chunk_size=3)
        gen = og.Generator(model, params)
        gen.append_tokens(prompt_ids)
        trace = []
        for _ in range(10):
            gen.generate_next_token()
        trace.append(gen.get_sequence(0).tolist())
        gen.rewind_to(len(prompt_ids) + 4)   # the next step feeds the token at that position again
        for _ in range(5):
            gen.generate_next_token()
        trace.append(gen.get_sequence(0).tolist())
        gen.rewind_to(len(prompt_ids) + 2)
        gen.append_tokens(np.array(prompt_ids[:3], np.int32))
        for _ in range(6):
            gen.generate_next_token()
        trace.append(gen.get_sequence(0).tolist())
        out[og] = trace
    assert out[kit_og] == out[real_og]


def test_search_options_read_back_as_the_real_package_gives_them(bpe_model, real_og, kit_og):
    got = []
    for og in (real_og, kit_og):
        params = og.GeneratorParams(og.Model(str(bpe_model)))
        params.set_search_options(max_length=99, do_sample=True, top_p=0.5, temperature=0.7, random_seed=4)
        got.append(params.get_search_options())
    assert got[1] == pytest.approx(got[0])


def test_refusals(bpe_model, real_og, kit_og, prompt_ids):
    for og in (real_og, kit_og):
        model = og.Model(str(bpe_model))
        params = og.GeneratorParams(model)
        params.set_search_options(max_length=4096)
        with pytest.raises(RuntimeError, match="context_length"):
            og.Generator(model, params)
        params = og.GeneratorParams(model)
        with pytest.raises(RuntimeError, match="no_such_option"):
            params.set_search_options(no_such_option=1)
        params.set_search_options(max_length=len(prompt_ids) + 2)
        gen = og.Generator(model, params)
        with pytest.raises(RuntimeError, match="no prior state"):
            gen.generate_next_token()
        with pytest.raises(RuntimeError, match="exceeds max length"):
            gen.append_tokens(np.concatenate([prompt_ids, prompt_ids]))
    params = kit_og.GeneratorParams(kit_og.Model(str(bpe_model)))
    params.set_search_options(num_beams=33)
    with pytest.raises(GenaiError, match=r"num_beams \(33\) must be in \[1, 32\]"):
        kit_og.Generator(params.model, params)
    with pytest.raises(GenaiNotSupported, match="constrained decoding"):
        params.set_guidance("regex", "a+")
    with pytest.raises(GenaiError, match="genai_config.json"):
        kit_og.Model(str(bpe_model.parent))


def test_the_shared_buffer_raises_no_warning_while_generating(bpe_model, kit_og, prompt_ids):
    """The present is max_length long where the model declares it as long as the mask (genai's
    shared buffer): onnxkit.genai keeps that from becoming a ConformanceWarning."""
    import warnings

    import onnxkit

    model = kit_og.Model(str(bpe_model))  # loading may warn (the builder's value_info): not this test's
    for share in (True, False):
        with warnings.catch_warnings():
            warnings.simplefilter("error", onnxkit.ConformanceWarning)
            params = kit_og.GeneratorParams(model)
            params.set_search_options(max_length=len(prompt_ids) + 5, past_present_share_buffer=share)
            gen = kit_og.Generator(model, params)
            gen.append_tokens(prompt_ids)
            while not gen.is_done():
                gen.generate_next_token()
