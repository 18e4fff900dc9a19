"""onnxruntime-genai's README example, unchanged, under ``python -m onnxkit.genai``: the same output
as under the real onnxruntime_genai 0.18.0, greedy, over 48 and more new tokens.

readme_example.py is the program of onnxruntime-genai's README ("Run the model"), copied as it
is there (the 3-space indent of the Markdown block removed).  It opens the model folder
``cpu_and_mobile/cpu-int4-rtn-block-32-acc-level-4`` relative to the working directory, reads a
prompt from stdin, and prints each new token through a TokenizerStream until the generator is
done (max_length 2048).  The test puts the tiny byte-level-BPE Llama there with an
end-of-sequence id chosen from the real package's own greedy continuation: the first token
that appears for the first time at step 48 or later, so that both runs stop after the same
>= 48 new tokens."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import genai_bpe_model

HERE = Path(__file__).resolve().parent
EXAMPLE = HERE / "readme_example.py"
MODEL_DIR = "cpu_and_mobile/cpu-int4-rtn-block-32-acc-level-4"
PROMPT = "The quick brown fox"
TEMPLATE = "<|user|>\n{input} <|end|>\n<|assistant|>"  # the example's chat template
MIN_NEW = 48


def _eos_after(real_og, folder: Path, prompt_ids, at_least: int) -> tuple:
    """(token, step): the first token of the real package's greedy continuation whose first
    appearance is at step ``at_least`` or later."""
    model = real_og.Model(str(folder))
    params = real_og.GeneratorParams(model)
    params.set_search_options(max_length=len(prompt_ids) + 160)
    gen = real_og.Generator(model, params)
    gen.append_tokens(prompt_ids)
    while not gen.is_done():
        gen.generate_next_token()
    new = gen.get_sequence(0)[len(prompt_ids):].tolist()
    for step, token in enumerate(new):
        if step >= at_least and token not in new[:step]:
            return token, step
    raise AssertionError(f"no new token after step {at_least} in the greedy continuation {new}")


def _run(cwd: Path, *runner, block_real: bool = False) -> subprocess.CompletedProcess:
    """The example run in ``cwd``; ``block_real``: an ``onnxruntime_genai`` first on PYTHONPATH that
    fails when imported, so that only onnxkit's stand-in can answer the example's import."""
    env = {k: v for k, v in os.environ.items() if k not in ("ONNXKIT_AS_ONNXRUNTIME_GENAI",)}
    if block_real:
        blocker = cwd / "blocker" / "onnxruntime_genai"
        blocker.mkdir(parents=True, exist_ok=True)
        (blocker / "__init__.py").write_text("raise ImportError('the real onnxruntime_genai was imported')\n")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(blocker.parent), env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, *runner, str(EXAMPLE)], input=PROMPT + "\n", capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=300)


def test_readme_example_runs_unchanged_and_prints_what_the_real_package_prints(tmp_path, bpe_model, real_og, kit_og):
    tokenizer = real_og.Tokenizer(real_og.Model(str(bpe_model)))
    prompt_ids = tokenizer.encode(TEMPLATE.format(input=PROMPT))
    eos, step = _eos_after(real_og, bpe_model, prompt_ids, MIN_NEW)
    assert step >= MIN_NEW
    genai_bpe_model.variant(bpe_model, tmp_path / MODEL_DIR, model={"eos_token_id": eos})

    real = _run(tmp_path)
    kit = _run(tmp_path, "-m", "onnxkit.genai", block_real=True)
    assert real.returncode == 0, real.stderr[-3000:]
    assert kit.returncode == 0, kit.stderr[-3000:]
    assert real.stdout.startswith("Input: Output: ") and len(real.stdout) > len("Input: Output: ") + MIN_NEW // 2
    assert kit.stdout == real.stdout
    blocked = _run(tmp_path, block_real=True)  # the blocker works: without the runner the import fails
    assert blocked.returncode != 0 and "the real onnxruntime_genai was imported" in blocked.stderr

    # the same tokens behind the text: the example's loop in this process, token by token, on both
    tokens = {}
    for og in (real_og, kit_og):
        model = og.Model(str(tmp_path / MODEL_DIR))
        params = og.GeneratorParams(model)
        params.set_search_options(max_length=2048, batch_size=1)
        gen = og.Generator(model, params)
        gen.append_tokens(og.Tokenizer(model).encode(TEMPLATE.format(input=PROMPT)))
        tokens[og] = []
        while not gen.is_done():
            gen.generate_next_token()
            tokens[og].append(int(gen.get_next_tokens()[0]))
    assert tokens[kit_og] == tokens[real_og]
    assert len(tokens[real_og]) == step + 1 >= MIN_NEW and tokens[real_og][-1] == eos  # stopped by the end of sequence


def test_the_example_file_is_the_readme_program():
    """The copy is the README's program: its calls, in order (a guard against edits to the copy)."""
    text = EXAMPLE.read_text()
    calls = ["import onnxruntime_genai as og", "og.Model('cpu_and_mobile/cpu-int4-rtn-block-32-acc-level-4')",
             "og.Tokenizer(model)", "tokenizer.create_stream()", "search_options['max_length'] = 2048",
             "input(\"Input: \")", "tokenizer.encode(prompt)", "og.GeneratorParams(model)",
             "params.set_search_options(**search_options)", "og.Generator(model, params)",
             "generator.append_tokens(input_tokens)", "while not generator.is_done():",
             "generator.generate_next_token()", "generator.get_next_tokens()[0]", "stream.decode(new_token)"]
    positions = [text.index(c) for c in calls]
    assert positions == sorted(positions)
    assert "onnxkit" not in text
