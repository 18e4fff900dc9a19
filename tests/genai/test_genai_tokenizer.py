"""onnxkit.genai's Tokenizer and TokenizerStream against the real onnxruntime_genai 0.18.0 on the same
model folder: encode, decode (text and arbitrary id runs, bytes that are not UTF-8 included),
the stream piece by piece (byte-level and SentencePiece-style BPE, with and without
clean_up_tokenization_spaces), batches, options, ids and chat templates."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

import genai_bpe_model
from onnxkit.genai import GenaiError, GenaiNotSupported

TEXTS = ["The quick brown fox", "héllo wörld ✓ 日本語のテキスト", "<s>Hello<|endoftext|> x", "", "  two  spaces\n\ttab",
         "Numbers 0 1 2 3 and emoji 🙂 unseen", "<|user|>\nWhat is the answer? <|end|>\n<|assistant|>"]


@pytest.fixture(scope="module")
def tokenizers(bpe_model, real_og, kit_og):
    return real_og.Tokenizer(real_og.Model(str(bpe_model))), kit_og.Tokenizer(kit_og.Model(str(bpe_model)))


FLAVOURS = ["byte-level", "byte-level-cleanup", "sentencepiece", "sentencepiece-cleanup"]


@pytest.fixture(scope="module", params=FLAVOURS)
def flavour(request, tmp_path_factory, bpe_model, real_og, kit_og):
    """(real, kit) tokenizers of one flavour: byte-level BPE or SentencePiece-style, with or without
    clean_up_tokenization_spaces (which spaces special tokens in the stream)."""
    files = {} if request.param.startswith("byte") else genai_bpe_model.sentencepiece_files()
    config = json.loads(files.get("tokenizer_config.json") or (bpe_model / "tokenizer_config.json").read_text())
    config["clean_up_tokenization_spaces"] = request.param.endswith("cleanup")
    files["tokenizer_config.json"] = json.dumps(config)
    folder = genai_bpe_model.variant(bpe_model, tmp_path_factory.mktemp(request.param), tokenizer=files)
    return real_og.Tokenizer(real_og.Model(str(folder))), kit_og.Tokenizer(kit_og.Model(str(folder)))


def _id_runs(vocab: int) -> list:
    rng = np.random.default_rng(5)
    return [rng.integers(0, vocab, size=n).astype(np.int32) for n in (1, 3, 8, 30, 60)]


def test_encode_and_decode_equal_the_real_package(flavour):
    real, kit = flavour
    for text in TEXTS:
        want = real.encode(text)
        got = kit.encode(text)
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, want, err_msg=repr(text))
        assert kit.decode(want) == real.decode(want)
    for ids in _id_runs(400):
        assert kit.decode(ids) == real.decode(ids), ids.tolist()


def test_the_stream_gives_the_same_pieces(flavour):
    real, kit = flavour
    runs = [real.encode(t) for t in TEXTS] + _id_runs(400) + [np.array([0, 261, 1, 291, 135, 135, 244, 5], np.int32),
                                                              np.array([1, 2, 300, 1, 330, 2, 0, 311], np.int32)]
    for ids in runs:
        a, b = real.create_stream(), kit.create_stream()
        want = [a.decode(int(t)) for t in ids]
        assert [b.decode(int(t)) for t in ids] == want, ids.tolist()


def test_a_character_split_over_tokens_waits_for_its_last_byte(tokenizers):
    real, kit = tokenizers  # byte-level: 日本語 is three bytes a character, one token a byte here
    stream = kit.create_stream()
    pieces = [stream.decode(int(t)) for t in real.encode("日本語 ✓")]
    assert "" in pieces and "".join(pieces) == "日本語 ✓"


def test_batches_ids_and_options_equal_the_real_package(tokenizers, tmp_path, bpe_model, real_og, kit_og):
    real, kit = tokenizers
    prompts = ["Hello world", "The first 4 digits of pi are", "x"]
    want, got = real.encode_batch(prompts), kit.encode_batch(prompts)
    assert got.shape() == want.shape()
    np.testing.assert_array_equal(got.as_numpy(), want.as_numpy())
    assert kit.decode_batch(got) == real.decode_batch(want) == prompts
    assert kit.to_token_id("<s>") == real.to_token_id("<s>") and kit.to_token_id("zzqq") == real.to_token_id("zzqq")
    np.testing.assert_array_equal(kit.eos_token_ids, real.eos_token_ids)
    assert (kit.bos_token_id, kit.pad_token_id) == (real.bos_token_id, real.pad_token_id)
    for tok in (real, kit):
        with pytest.raises(RuntimeError, match="bot_token_id"):
            tok.bot_token_id
        with pytest.raises(RuntimeError, match="no_such"):
            tok.update_options(no_such="1")

    # a post-processor that adds <s>: only with add_special_tokens (genai's default is false)
    from tokenizers import Tokenizer, processors

    tk = Tokenizer.from_file(str(bpe_model / "tokenizer.json"))
    tk.post_processor = processors.Sequence([processors.ByteLevel(trim_offsets=False),
                                             processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])])
    folder = genai_bpe_model.variant(bpe_model, tmp_path / "bos", tokenizer={"tokenizer.json": tk.to_str()})
    both = [og.Tokenizer(og.Model(str(folder))) for og in (real_og, kit_og)]
    for flag in ("false", "true", "false"):
        results = []
        for tok in both:
            tok.update_options(add_special_tokens=flag, skip_special_tokens="false" if flag == "true" else "true")
            ids = tok.encode("Hi there")
            results.append((ids.tolist(), tok.decode(ids)))
        assert results[1] == results[0]
    assert results[0][0][0] != 1 and both[0].encode("Hi")[0] != 1


def test_chat_templates_render_as_the_real_package_renders_them(tokenizers):
    real, kit = tokenizers
    template = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>\n{% endfor %}"
                "{% if add_generation_prompt %}<|assistant|>{% endif %}")
    messages = json.dumps([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "héllo?"}])
    for add in (True, False):
        assert kit.apply_chat_template(messages, template_str=template, add_generation_prompt=add) == \
            real.apply_chat_template(messages, template_str=template, add_generation_prompt=add)
    for tok in (real, kit):  # the folder's tokenizer_config.json has no template
        with pytest.raises(RuntimeError, match="Empty chat template"):
            tok.apply_chat_template(messages)


def test_refusals_name_what_is_missing(tokenizers, bpe_model, kit_og, monkeypatch):
    _, kit = tokenizers
    with pytest.raises(GenaiError, match="encode: expected a str"):
        kit.encode(b"bytes")
    with pytest.raises(GenaiError, match="2-D"):
        kit.decode_batch(np.zeros(3, np.int32))
    model = kit_og.Model(str(bpe_model))
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # as if the library were not installed
    with pytest.raises(GenaiNotSupported, match=r"onnxkit-core\[genai\]"):
        kit_og.Tokenizer(model)
