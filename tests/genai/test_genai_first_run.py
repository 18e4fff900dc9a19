"""onnxkit.genai's first-run request: a Generator tells its session's cold plan how many runs are
to come (about one a token, up to ``max_length``: :meth:`onnxkit.runtime.bodies.FirstRun.expect`),
so the warm plan's setup is forecast rather than waited for; a session that plans warm has no
cold record and is left as it is."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.filterwarnings("ignore::onnxkit.errors.ConformanceWarning")

PROMPT_IDS = [5, 9, 17, 33]


def _generator(og, folder, max_length):
    model = og.Model(str(folder))
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=max_length)
    return model, og.Generator(model, params)


def test_a_generator_states_its_length_to_the_cold_plan(bpe_model, kit_og, monkeypatch, fresh_process_patch):
    monkeypatch.delenv("ONNXKIT_FIRST_RUN", raising=False)
    fresh_process_patch(monkeypatch)  # a fresh process's cold plan, its setup out of reach
    model = kit_og.Model(str(bpe_model))
    cold = model._session._cold
    assert cold is not None and cold.expected == 0  # a session alone states nothing
    model, gen = _generator(kit_og, bpe_model, 40)
    cold = model._session._cold
    assert cold.expected == 40
    gen.append_tokens(PROMPT_IDS)
    for _ in range(3):
        gen.generate_next_token()
    assert model._session._cold is cold and cold.ran  # still cold (the setup is out of reach here)


def test_a_warm_session_has_no_record_to_tell(bpe_model, kit_og, monkeypatch):
    monkeypatch.setenv("ONNXKIT_FIRST_RUN", "warm")
    model, gen = _generator(kit_og, bpe_model, 12)
    assert model._session._cold is None
    gen.append_tokens(PROMPT_IDS)
    gen.generate_next_token()
    assert gen.token_count() == len(PROMPT_IDS) + 1
