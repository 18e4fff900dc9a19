"""Tiny random-weight decoders built by onnxruntime-genai's model builder, cached for the tests.

:func:`build` makes a Hugging Face checkpoint from a small ``transformers`` config (random weights,
seeded), a small local word-level tokenizer saved as a ``PreTrainedTokenizerFast`` beside it, and
runs ``python -m onnxruntime_genai.models.builder -i <checkpoint> -o <out> -p <precision> -e cpu``
on it (no hub access).  The result (``model.onnx``, its external data, ``genai_config.json``,
``tokenizer.json``, ``tokenizer_config.json``) is kept under
``/work/main/.cache/genai_models/<arch>-<precision>`` (``-<ep>`` after it for another execution
provider; ``.cache`` is git-ignored), with the
recipe's hash recorded in ``recipe.json``: a later call with the same recipe reuses it, a changed
recipe (config, precision, builder options, builder version) rebuilds it.

Architectures: :data:`ARCHS` (``llama``, ``qwen2``, ``phi3``, ``mistral``, ``gemma``, ``gemma2``,
``qwen3``, ``phi``); precisions
``fp32`` and ``int4`` (CPU).  :data:`UNBUILDABLE` records an architecture the builder cannot build
here and why (empty when every one builds).

    from genai_models import build
    folder = build("llama", "int4")       # a pathlib.Path holding model.onnx and genai_config.json
    build("qwen2", "fp32", extra={"kv_cache_quant_scheme": "int8_per_tensor"})  # an int8 KV cache
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

#: where the built models are kept (git-ignored)
CACHE = Path(__file__).resolve().parents[2] / ".cache" / "genai_models"

VOCAB = 128  # tokens of the word-level tokenizer and every model's vocabulary

#: ``{arch: (transformers config class name, config keyword arguments)}``: 2 layers, hidden 64,
#: grouped K/V heads (4 query heads over 2), a small vocabulary and context.  What each brings to
#: GroupQueryAttention: mistral's first layer a sliding window of 12 (local_window_size with a
#: window-sized KV buffer, sliding_window_cache); gemma2 that on alternate layers plus softcap;
#: qwen3 Q/K RMS norms (explicit nodes before the attention on the CPU); phi partial rotary (half
#: of each head) and LayerNorm
ARCHS = {
    "llama": ("LlamaConfig", dict(hidden_size=64, intermediate_size=128, num_attention_heads=4,
                                  num_key_value_heads=2)),
    "qwen2": ("Qwen2Config", dict(hidden_size=64, intermediate_size=128, num_attention_heads=4,
                                  num_key_value_heads=2)),
    "phi3": ("Phi3Config", dict(hidden_size=64, intermediate_size=128, num_attention_heads=4,
                                num_key_value_heads=2, pad_token_id=2, original_max_position_embeddings=256)),
    "mistral": ("MistralConfig", dict(hidden_size=64, intermediate_size=128, num_attention_heads=4,
                                      num_key_value_heads=2, head_dim=16, sliding_window=12,
                                      layer_types=["sliding_attention", "full_attention"])),
    "gemma": ("GemmaConfig", dict(hidden_size=64, intermediate_size=128, num_attention_heads=4,
                                  num_key_value_heads=2, head_dim=16)),
    "gemma2": ("Gemma2Config", dict(hidden_size=64, intermediate_size=128, num_attention_heads=4,
                                    num_key_value_heads=2, head_dim=16, sliding_window=12,
                                    attn_logit_softcapping=20.0, final_logit_softcapping=30.0)),
    "qwen3": ("Qwen3Config", dict(hidden_size=64, intermediate_size=128, num_attention_heads=4,
                                  num_key_value_heads=2, head_dim=16)),
    # head 32, half of it rotated (onnxruntime wants cos_cache's width a multiple of 8)
    "phi": ("PhiConfig", dict(hidden_size=128, intermediate_size=128, num_attention_heads=4,
                              num_key_value_heads=2, partial_rotary_factor=0.5)),
}
COMMON = dict(vocab_size=VOCAB, num_hidden_layers=2, max_position_embeddings=256, bos_token_id=1,
              eos_token_id=2, tie_word_embeddings=False)

PRECISIONS = ("fp32", "int4")

#: other (precision, execution provider) pairs the builder writes differently: ``fp16`` for
#: ``dml`` keeps RoPE out of GroupQueryAttention (separate RotaryEmbedding nodes over
#: ``position_ids``, Q/K/V unpacked, float16 throughout) and onnxruntime's CPU provider runs it
OTHER_TARGETS = (("fp16", "dml"),)

#: ``{arch: reason}`` for architectures onnxruntime-genai's builder cannot build here
UNBUILDABLE: dict = {}

#: extra builder options per precision (``--extra_options``); int4 keeps the builder's defaults
#: (block_size 32, symmetric, accuracy_level 4 on CPU: A quantized to int8 in MatMulNBits)
EXTRA: dict = {"fp32": {}, "int4": {}, "fp16": {}}

SEED = 0


class BuildError(RuntimeError):
    """The model builder failed for a recipe (its output attached)."""


def _builder_version() -> str:
    from importlib.metadata import version

    return version("onnxruntime-genai")


def recipe(arch: str, precision: str, extra: dict | None = None, ep: str = "cpu") -> dict:
    """The description a cached build is keyed by."""
    if arch not in ARCHS:
        raise KeyError(f"unknown architecture {arch!r}; known: {sorted(ARCHS)}")
    if (precision not in PRECISIONS or ep != "cpu") and (precision, ep) not in OTHER_TARGETS:
        raise KeyError(f"unknown precision / execution provider {precision!r} / {ep!r}; known: "
                       f"{[(p, 'cpu') for p in PRECISIONS] + list(OTHER_TARGETS)}")
    cls, kwargs = ARCHS[arch]
    return {"arch": arch, "config_class": cls, "config": {**COMMON, **kwargs}, "precision": precision,
            "extra_options": {**EXTRA[precision], **(extra or {})}, "seed": SEED, "vocab": VOCAB,
            "builder": _builder_version(), **({} if ep == "cpu" else {"ep": ep})}


def _key(r: dict) -> str:
    return hashlib.sha256(json.dumps(r, sort_keys=True).encode()).hexdigest()[:16]


def _checkpoint(r: dict, folder: Path) -> None:
    """A seeded random-weight checkpoint of ``r``'s config and a word-level tokenizer in ``folder``."""
    import torch
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    torch.manual_seed(r["seed"])
    config = getattr(transformers, r["config_class"])(**r["config"])
    model = transformers.AutoModelForCausalLM.from_config(config)
    with torch.no_grad():  # larger than default weights: logits far apart, greedy choices robust
        for p in model.parameters():
            if p.ndim >= 2:
                p.normal_(0.0, 0.2)
    model.save_pretrained(folder)
    vocab = {f"w{i}": i for i in range(r["vocab"])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="w0"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="w0", bos_token="w1",
                                                eos_token="w2", pad_token="w2")
    fast.save_pretrained(folder)


def _kv_scale_file(r: dict, path: Path) -> Path:
    """The builder's KV cache scale file for ``r``: per layer one key and one value scale
    (per_tensor schemes) or one per K/V head feature (per_channel), fixed values covering the tiny
    models' keys and values (int8: |x| <= 127 * 0.05; int4: 7 * 0.4)."""
    cfg = r["config"]
    layers, nkv = cfg["num_hidden_layers"], cfg["num_key_value_heads"]
    head = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    scheme = r["extra_options"]["kv_cache_quant_scheme"]
    unit = 0.05 if scheme.startswith("int8") else 0.4
    per = [unit] if scheme.endswith("per_tensor") else [unit * (1 + (i % 3) / 4) for i in range(nkv * head)]
    scales = {"k_scales": [per if len(per) > 1 else per[0]] * layers,
              "v_scales": [[0.8 * x for x in per] if len(per) > 1 else 0.8 * per[0]] * layers}
    path.write_text(json.dumps({"scales": scales}))
    return path


def build(arch: str, precision: str = "fp32", extra: dict | None = None, force: bool = False,
          ep: str = "cpu") -> Path:
    """The folder of ``arch`` built at ``precision`` for ``ep`` (the CPU; or one of
    :data:`OTHER_TARGETS`), reused when its recipe is unchanged.

    Raises :class:`BuildError` (the builder's output in the message) when the builder fails."""
    r = recipe(arch, precision, extra, ep)
    key = _key(r)
    suffix = ("" if ep == "cpu" else f"-{ep}") + ("" if not extra else "-" + key[:8])
    out = CACHE / f"{arch}-{precision}{suffix}"
    stamp = out / "recipe.json"
    if not force and stamp.exists() and json.loads(stamp.read_text()).get("key") == key \
            and (out / "model.onnx").exists():
        return out
    work = CACHE / f".work-{arch}-{precision}-{key}-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    hf, onnx_out = work / "hf", work / "onnx"
    hf.mkdir(parents=True)
    try:
        _checkpoint(r, hf)
        cmd = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(hf), "-o", str(onnx_out),
               "-p", precision, "-e", ep, "-c", str(work / "cache")]
        options = dict(r["extra_options"])
        if "kv_cache_quant_scheme" in options:  # static KV cache scales: the builder reads them from a file
            options["kv_cache_scale_file"] = str(_kv_scale_file(r, work / "kv_scales.json"))
        if options:
            cmd += ["--extra_options", *(f"{k}={v}" for k, v in options.items())]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TQDM_DISABLE": "1"}
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
        if done.returncode != 0 or not (onnx_out / "model.onnx").exists():
            raise BuildError(f"the model builder failed for {arch} {precision} (exit {done.returncode}):\n"
                             f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
        (onnx_out / "recipe.json").write_text(json.dumps({"key": key, "recipe": r}, indent=1, sort_keys=True))
        shutil.rmtree(out, ignore_errors=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(onnx_out, out)
        except OSError:  # another process built the same recipe meanwhile: keep its folder
            if not (stamp.exists() and json.loads(stamp.read_text()).get("key") == key):
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def genai_config(folder: Path) -> dict:
    """The ``genai_config.json`` of a built folder."""
    return json.loads((Path(folder) / "genai_config.json").read_text())


if __name__ == "__main__":  # python tests/generative/genai_models.py [arch ...]: build (and time) them
    import time

    for a in sys.argv[1:] or ARCHS:
        for p in PRECISIONS:
            t0 = time.perf_counter()
            try:
                print(a, p, build(a, p), f"{time.perf_counter() - t0:.1f}s")
            except BuildError as e:
                print(a, p, "FAILED", str(e)[-1500:])
