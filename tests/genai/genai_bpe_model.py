"""A tiny random-weight Llama with a byte-level BPE tokenizer, built by onnxruntime-genai's builder.

The tokenizer is what onnxruntime-genai's own tokenizer (onnxruntime-extensions) reads: a
byte-level BPE (``tokenizers``) trained on a fixed text, ``<|endoftext|>`` (id 0) and ``<s>``
(id 1) special; the word-level tokenizer of tests/generative/genai_models.py is not one it
loads.  The model: 2 layers, hidden 64, 4 query heads over 2 key/value heads, context 2048
(the README example asks for max_length 2048).  Built once into
``.cache/genai_models/bpe-llama-<recipe hash>`` (git-ignored) and reused while the recipe holds.

:func:`variant` copies a built folder with ``genai_config.json`` changed (no symbolic links:
onnxkit refuses external data reached through one).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

CACHE = Path(__file__).resolve().parents[2] / ".cache" / "genai_models"

TEXT = ["The quick brown fox jumps over the lazy dog. " * 3, "Hello world, this is onnxkit running a tiny llama.",
        "The first 4 digits of pi are 3.141", "Numbers 0 1 2 3 4 5 6 7 8 9 and punctuation !?,.;:",
        "héllo wörld ✓ 日本語のテキスト", "<|user|>\nWhat is the answer? <|end|>\n<|assistant|>"] * 20

RECIPE = {"vocab": 400, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 2048, "seed": 0,
          "std": 0.2, "text": TEXT, "version": 1}


def _checkpoint(folder: Path) -> None:
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=RECIPE["vocab"], special_tokens=["<|endoftext|>", "<s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(TEXT, trainer)
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="<|endoftext|>",
                                                unk_token="<|endoftext|>")
    fast.save_pretrained(folder)
    torch.manual_seed(RECIPE["seed"])
    config = transformers.LlamaConfig(
        vocab_size=tok.get_vocab_size(), bos_token_id=1, eos_token_id=0, pad_token_id=0,
        **{k: RECIPE[k] for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                                  "num_key_value_heads", "max_position_embeddings")})
    model = transformers.LlamaForCausalLM(config)
    with torch.no_grad():  # larger than default weights: logits far apart, greedy choices robust
        for p in model.parameters():
            p.normal_(0.0, RECIPE["std"])
    model.save_pretrained(folder)


def build() -> Path:
    """The built folder (``model.onnx``, ``genai_config.json``, ``tokenizer.json`` ...)."""
    import onnxruntime_genai

    recipe = dict(RECIPE, builder=onnxruntime_genai.__version__)
    key = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:12]
    out = CACHE / f"bpe-llama-{key}"
    if (out / "genai_config.json").exists() and (out / "model.onnx").exists():
        return out
    work = CACHE / f".work-bpe-llama-{key}-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    (work / "hf").mkdir(parents=True)
    try:
        _checkpoint(work / "hf")
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TQDM_DISABLE": "1"}
        done = subprocess.run([sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(work / "hf"),
                               "-o", str(work / "onnx"), "-p", "fp32", "-e", "cpu", "-c", str(work / "cache")],
                              capture_output=True, text=True, env=env, timeout=900)
        if done.returncode or not (work / "onnx" / "model.onnx").exists():
            raise RuntimeError(f"the model builder failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(out, ignore_errors=True)
        os.replace(work / "onnx", out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def variant(source: Path, dest: Path, model: dict = None, search: dict = None, tokenizer: dict = None) -> Path:
    """A copy of ``source`` in ``dest`` whose genai_config.json has ``model`` / ``search`` merged in
    (``tokenizer``: replacement files, name -> text)."""
    dest.mkdir(parents=True, exist_ok=True)
    for f in source.iterdir():
        if f.is_file():
            shutil.copyfile(f, dest / f.name)
    config = json.loads((source / "genai_config.json").read_text())
    config["model"].update(model or {})
    config["search"].update(search or {})
    (dest / "genai_config.json").write_text(json.dumps(config, indent=1))
    for name, text in (tokenizer or {}).items():
        (dest / name).write_text(text)
    return dest


def sentencepiece_files() -> dict:
    """``tokenizer.json`` and ``tokenizer_config.json`` of a Llama-style (SentencePiece) BPE trained
    on :data:`TEXT` (no merge joins a digit to anything): ``▁`` for spaces (prepended), byte-fallback pieces ``<0x00>``..``<0xFF>``, a
    decoder that replaces ``▁``, fuses bytes and strips one leading space; ``<unk>``, ``<s>``,
    ``</s>`` special (ids 0-2), ``<s>`` added by the post-processor.  Under 400 ids: it fits the
    model of :func:`build`."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    norm = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    draft = Tokenizer(models.BPE())
    draft.normalizer = norm
    # digits one by one, as Llama's SentencePiece models are trained (onnxruntime-extensions splits them)
    draft.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split("\u2581", behavior="merged_with_next"),
                                                   pre_tokenizers.Digits(individual_digits=True)])
    draft.train_from_iterator(TEXT, trainers.BpeTrainer(vocab_size=120))
    model = json.loads(draft.to_str())["model"]
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{f"<0x{i:02X}>": 3 + i for i in range(256)}}
    for piece, _ in sorted(model["vocab"].items(), key=lambda kv: kv[1]):
        vocab.setdefault(piece, len(vocab))
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    tok.normalizer = norm
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.add_special_tokens(["<unk>", "<s>", "</s>"])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    config = {"add_bos_token": True, "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
              "tokenizer_class": "LlamaTokenizer", "legacy": False, "clean_up_tokenization_spaces": False}
    return {"tokenizer.json": tok.to_str(), "tokenizer_config.json": json.dumps(config)}
