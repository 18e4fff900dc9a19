"""Corpus source: transformers architectures built from a small config with random weights.

No hub download exists here: each model is ``Model(Config(...))`` (2 layers, hidden 64), its
weights seeded, wrapped so that it is called with keyword inputs and returns its first output
(``last_hidden_state`` or ``logits``), and exported with both torch.onnx exporters through
:func:`corpus_torch.export` (batch and sequence axes dynamic; exported with a batch of 2 and
12 tokens, fed 3 and 9).  Whisper's encoder uses ``aten::diff``, which the TorchScript exporter cannot translate, so it is exported by dynamo only;
T5 by TorchScript only (the dynamo exporter fails decomposing its attention reshape: "Cannot view
a tensor with shape [2, 10, 2, 32] ... as a tensor with shape (2, 10, 64)").
One model is at full size instead: ``whisper_encoder_long``, Whisper's encoder alone at
whisper-tiny's width (d_model 384, 4 layers, 6 heads, 80 mel bins) over the full 30 s input
(80 x 3000 features -> 1,500 frames), batch 1, no dynamic axis (the encoder requires 3000
frames), exported by dynamo: the long-sequence attention real speech models spend time in.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from corpus_common import Entry, integers, normal, rng_for, seed_torch
from corpus_torch import export

VOCAB = 1000
EXPORT_SIZE, FEED_SIZE = (2, 12), (3, 9)  # (batch, sequence length): exported with one, fed the other
TEXT = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}}


def _configs():
    """(name, model class, config, input factory(rng, batch, length), dynamic axes, exporters)."""
    import transformers as t

    small = dict(num_hidden_layers=2, num_attention_heads=2, intermediate_size=128)
    text = lambda rng, b, n: {"input_ids": integers(rng, VOCAB, (b, n)),  # noqa: E731
                              "attention_mask": (np.arange(n)[None, :] < n - np.arange(b)[:, None]).astype(np.int64)}
    seq2seq = lambda rng, b, n: {"input_ids": integers(rng, VOCAB, (b, n)),  # noqa: E731
                                 "decoder_input_ids": integers(rng, VOCAB, (b, n // 2))}
    tokens = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)
    both = ("ts", "dynamo")
    return [
        ("bert", t.BertModel, t.BertConfig(vocab_size=VOCAB, hidden_size=64, max_position_embeddings=64, **small),
         text, TEXT, both),
        ("distilbert", t.DistilBertModel, t.DistilBertConfig(vocab_size=VOCAB, dim=64, n_layers=2, n_heads=2,
                                                             hidden_dim=128, max_position_embeddings=64),
         text, TEXT, both),
        ("gpt2", t.GPT2LMHeadModel, t.GPT2Config(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=2, n_positions=64,
                                                 use_cache=False, **tokens),
         text, TEXT, both),
        ("vit", t.ViTModel, t.ViTConfig(image_size=32, patch_size=8, hidden_size=64, **small),
         lambda rng, b, n: {"pixel_values": normal(rng, (b, 3, 32, 32))}, {"pixel_values": {0: "batch"}}, both),
        ("t5", t.T5Model, t.T5Config(vocab_size=VOCAB, d_model=64, d_kv=32, d_ff=128, num_layers=2, num_heads=2,
                                     use_cache=False, decoder_start_token_id=0, **tokens),
         seq2seq, {"input_ids": {0: "batch", 1: "sequence"}, "decoder_input_ids": {0: "batch", 1: "target"}}, ("ts",)),
        ("whisper", t.WhisperModel, t.WhisperConfig(vocab_size=VOCAB, d_model=64, encoder_layers=2, decoder_layers=2,
                                                    encoder_attention_heads=2, decoder_attention_heads=2,
                                                    encoder_ffn_dim=128, decoder_ffn_dim=128, num_mel_bins=16,
                                                    max_source_positions=32, max_target_positions=32,
                                                    use_cache=False, decoder_start_token_id=1, **tokens),
         lambda rng, b, n: {"input_features": normal(rng, (b, 16, 64)),
                            "decoder_input_ids": integers(rng, VOCAB, (b, n // 2))},
         {"input_features": {0: "batch"}, "decoder_input_ids": {0: "batch", 1: "target"}}, ("dynamo",)),
        ("whisper_encoder_long", t.models.whisper.modeling_whisper.WhisperEncoder,
         t.WhisperConfig(vocab_size=VOCAB, d_model=384, encoder_layers=4, encoder_attention_heads=6,
                         encoder_ffn_dim=1536, num_mel_bins=80, max_source_positions=1500,
                         decoder_layers=1, decoder_attention_heads=6, decoder_ffn_dim=64, max_target_positions=32,
                         use_cache=False, decoder_start_token_id=1, **tokens),
         lambda rng, b, n: {"input_features": normal(rng, (1, 80, 3000))}, {}, ("dynamo",)),
    ]


def build(out: Path) -> list[Entry]:
    """Build each configured model and export it with its exporters; one Entry per file."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    import transformers

    class FirstOutput(torch.nn.Module):
        """Calls the wrapped model with keyword inputs and returns its first output."""

        def __init__(self, model, keys):
            super().__init__()
            self.model, self.keys = model, keys

        def first(self, *args):
            return self.model(**dict(zip(self.keys, args)))[0]

    class OneInput(FirstOutput):
        def forward(self, a):  # torch.export needs named positional parameters
            return self.first(a)

    class TwoInputs(FirstOutput):
        def forward(self, a, b):
            return self.first(a, b)

    transformers.logging.set_verbosity_error()
    entries = []
    for base, cls, config, make_inputs, dynamic, exporters in _configs():
        for exporter in exporters:
            name = f"hf_{base}_{exporter}"
            seed_torch(base)
            rng = rng_for(base)
            example = {k: torch.from_numpy(v) for k, v in make_inputs(rng, *EXPORT_SIZE).items()}
            inputs = make_inputs(rng, *FEED_SIZE)
            module = (OneInput, TwoInputs)[len(inputs) - 1](cls(config), list(inputs))
            export(module, example, out / f"{name}.onnx", exporter, dynamic)
            producer = f"transformers + torch.onnx {'TorchScript' if exporter == 'ts' else 'dynamo'} exporter"
            entries.append(Entry(name, producer, f"transformers {transformers.__version__}, torch {torch.__version__}",
                                 inputs, note=f"{cls.__name__}, random weights"))
    return entries
