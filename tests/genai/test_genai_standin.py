"""onnxkit standing in for onnxruntime_genai: install_as_onnxruntime_genai / uninstall, the runner
``python -m onnxkit.genai`` (child processes too), Config edits, and the refusals that name what
onnxkit.genai does not do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import genai_bpe_model
import onnxkit
from onnxkit.genai import GenaiError, GenaiNotSupported, install

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def standin():
    saved = {n: m for n, m in sys.modules.items() if n == "onnxruntime_genai" or n.startswith("onnxruntime_genai.")}
    onnxkit.install_as_onnxruntime_genai()
    yield sys.modules["onnxruntime_genai"]
    install.uninstall()
    sys.modules.update(saved)


def test_import_onnxruntime_genai_gives_onnxkit_genai_until_uninstalled(standin):
    import onnxruntime_genai as og
    import onnxruntime_genai.tokenizer

    assert og is sys.modules["onnxkit.genai"] and og.Generator is onnxkit.genai.Generator
    assert onnxruntime_genai.tokenizer is sys.modules["onnxkit.genai.tokenizer"]
    assert og.__version__ == "0.18.0" and og.__id__ == "onnxruntime-genai" and install.installed()
    with pytest.raises(ModuleNotFoundError, match="onnxkit stands in for onnxruntime_genai"):
        import onnxruntime_genai.models.builder  # noqa: F401  (not provided: never half the real package)
    onnxkit.install_as_onnxruntime_genai()  # idempotent
    assert sum(f is install._GENAI.finder for f in sys.meta_path) == 1
    install.uninstall()
    assert not install.installed() and "onnxruntime_genai" not in sys.modules
    import onnxruntime_genai as real

    assert real.__name__ == "onnxruntime_genai" and not hasattr(real, "GenaiError")


def test_the_runner_stands_in_for_the_program_and_its_children(tmp_path):
    script = tmp_path / "client.py"
    script.write_text(textwrap.dedent("""
        import sys, subprocess
        from importlib.metadata import version
        import onnxruntime_genai as og
        og.set_log_options(enabled=True, model_input_values=False)
        child = subprocess.run([sys.executable, "-c", "import onnxruntime_genai as og; print(og.__name__)"],
                               capture_output=True, text=True).stdout.strip()
        print(og.__name__, version("onnxruntime-genai"), sys.argv[1:], child, og.is_cuda_available())
    """))
    env = {k: v for k, v in os.environ.items() if k != "ONNXKIT_AS_ONNXRUNTIME_GENAI"}
    done = subprocess.run([sys.executable, "-m", "onnxkit.genai", str(script), "a", "--b"], capture_output=True,
                          text=True, cwd=tmp_path, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[0] == "onnxkit.genai 0.18.0 ['a', '--b'] onnxkit.genai False"
    usage = subprocess.run([sys.executable, "-m", "onnxkit.genai"], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 2 and "usage: python -m onnxkit.genai" in usage.stderr
    missing = subprocess.run([sys.executable, "-m", "onnxkit.genai", str(tmp_path / "nope.py")], capture_output=True,
                             text=True, timeout=60)
    assert missing.returncode == 2 and "no such script" in missing.stderr


def test_config_overlay_and_providers(tmp_path, bpe_model, real_og, kit_og):
    for og in (real_og, kit_og):
        config = og.Config(str(bpe_model))
        config.clear_providers()
        config.overlay(json.dumps({"search": {"max_length": 20, "top_k": 7}}))
        params = og.GeneratorParams(og.Model(config))
        options = params.get_search_options()
        assert (options["max_length"], options["top_k"]) == (20, 7)
    config = kit_og.Config(str(bpe_model))
    config.append_provider("dml")
    with pytest.raises(GenaiNotSupported, match="'dml'"):
        kit_og.Model(config)
    with pytest.raises(GenaiError, match="not a JSON object"):
        config.overlay("[1, 2]")
    config = kit_og.Config(str(bpe_model))
    config.add_model_data("model.onnx", (bpe_model / "model.onnx").read_bytes())
    with pytest.raises(GenaiError, match="remove_model_data"):
        config.remove_model_data("other.onnx")
    sequences = []
    for source in (config, str(bpe_model)):  # the model's bytes in memory, its external data in the folder
        model = kit_og.Model(source)
        params = kit_og.GeneratorParams(model)
        params.set_search_options(max_length=12)
        gen = kit_og.Generator(model, params)
        gen.append_tokens([5, 6, 7])
        while not gen.is_done():
            gen.generate_next_token()
        sequences.append(gen.get_sequence(0).tolist())
    assert sequences[0] == sequences[1] and len(sequences[0]) == 12


@pytest.mark.parametrize("change, match", [
    (dict(model={"type": "whisper"}), "model type 'whisper'"),
    (dict(model={"vision": {"filename": "vision.onnx"}}), "model.vision"),
    (dict(model={"decoder": {"filename": "model.onnx", "sliding_window": {"window_size": 8}}}),
     "sliding_window.slide_key_value_cache"),
], ids=["whisper", "vision", "sliding-window"])
def test_models_it_does_not_run_are_refused_by_name(tmp_path, bpe_model, kit_og, change, match):
    folder = genai_bpe_model.variant(bpe_model, tmp_path / "m", **change)
    with pytest.raises(GenaiNotSupported, match=match):
        kit_og.Model(str(folder))


def test_features_it_does_not_have_are_refused_by_name(bpe_model, kit_og):
    for call, match in [(lambda: kit_og.Images.open("a.png"), "og.Images"), (lambda: kit_og.Adapters(None), "og.Adapters"),
                        (lambda: kit_og.Engine(None), "og.Engine"),
                        (lambda: kit_og.register_execution_provider_library("x", "y"), "execution-provider"),
                        (lambda: kit_og.GeneratorParams(kit_og.Model(str(bpe_model))).set_guidance("json", "{}"),
                         "constrained decoding")]:
        with pytest.raises(GenaiNotSupported, match=match) as caught:
            call()
        assert isinstance(caught.value, RuntimeError) and "docs/genai.md" in str(caught.value)
