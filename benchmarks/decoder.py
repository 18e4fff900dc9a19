"""Greedy decoding with a growing KV cache: onnxkit-cpu vs onnxruntime, time per token.

Exports transformers' LlamaForCausalLM from a configuration (random weights, ``torch.manual_seed(0)``;
no download) with its past key/values as graph inputs and presents as outputs (torch's TorchScript
exporter, opset 17, eager attention) into ``--out`` (default ``.cache/decoders``; kept between
runs).  Two sizes: ``tiny`` (hidden 64, 2 layers: the per-node cost dominates) and ``small``
(hidden 256, 4 layers, vocabulary 2,048).

Each runtime decodes ``--tokens`` tokens after an 8-token prompt, one thread each (onnxkit
``intra_op_num_threads=1``; onnxruntime one intra-op and one inter-op thread), the two sessions
stepping token by token in turn (interleaved: token t of one, then token t of the other).  Prints
the median time per token over tokens 11-30 ("early") and over the last 20 ("late"), the slowest
token, the ratios, and whether the generated tokens are equal.  A program must not get slower as it
runs longer: the late/early column says whether it did.

``ONNXKIT_FIRST_RUN`` is ``warm`` unless set (``timing.py``); ``--policy tiered`` times the
default policy (the session promotes itself mid-stream).  Set ``OPENBLAS_NUM_THREADS=1`` for one
thread; ``--threads default`` leaves both runtimes their default threads (what a user gets).
Run: ``python benchmarks/decoder.py [--tokens N] [-k tiny|small] [--policy tiered] [--threads default]``.
Needs torch, transformers, onnxruntime.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
PROMPT = 8

#: name -> LlamaConfig keywords
SIZES = {
    "tiny": dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2),
    "small": dict(vocab_size=2048, hidden_size=256, intermediate_size=688, num_hidden_layers=4, num_attention_heads=8,
                  num_key_value_heads=4),
}


def export_llama(path: Path, size: str = "tiny") -> Path:
    """Export the ``size`` Llama decoder with its KV cache as inputs/outputs to ``path`` (if absent).

    Inputs ``input_ids [batch, seq]``, ``attention_mask [batch, total]``, ``past.{i}.key/value
    [batch, kv_heads, past, head_dim]``; outputs ``logits`` and ``present.{i}.key/value``."""
    if path.exists():
        return path
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.cache_utils import DynamicCache

    torch.manual_seed(0)
    cfg = LlamaConfig(max_position_embeddings=2048, **SIZES[size])
    cfg._attn_implementation = "eager"
    model = LlamaForCausalLM(cfg).eval()
    layers = cfg.num_hidden_layers
    head_dim = cfg.hidden_size // cfg.num_attention_heads

    class WithCache(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, *past):
            cache = DynamicCache()
            for i in range(layers):
                cache.update(past[2 * i], past[2 * i + 1], i)
            out = self.m(input_ids=input_ids, attention_mask=attention_mask, past_key_values=cache, use_cache=True)
            flat = []
            for layer in out.past_key_values.layers:
                flat += [layer.keys, layer.values]
            return (out.logits, *flat)

    past_names = [f"past.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    present = [f"present.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total"},
            "logits": {0: "batch", 1: "seq"}}
    axes.update({n: {0: "batch", 2: "past"} for n in past_names})
    axes.update({n: {0: "batch", 2: "total"} for n in present})
    past = [torch.randn(1, cfg.num_key_value_heads, 3, head_dim) for _ in past_names]
    args = (torch.randint(0, cfg.vocab_size, (1, 1)), torch.ones(1, 4, dtype=torch.int64), *past)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.onnx.export(WithCache(model), args, str(tmp), input_names=["input_ids", "attention_mask", *past_names],
                      output_names=["logits", *present], dynamic_axes=axes, opset_version=17, dynamo=False)
    tmp.replace(path)
    return path


class Decoder:
    """Greedy decoding on one session: :meth:`step` runs one token and returns its seconds."""

    def __init__(self, sess):
        self.sess = sess
        ins = sess.get_inputs()
        self.names = [i.name for i in ins]
        kv = ins[2]
        heads, head_dim = kv.shape[1], kv.shape[3]
        rng = np.random.default_rng(0)
        self.total = PROMPT
        past = [np.zeros((1, heads, 0, head_dim), np.float32) for _ in self.names[2:]]
        ids = rng.integers(0, 200, (1, PROMPT)).astype(np.int64)
        self.feed = dict(zip(self.names, [ids, np.ones((1, self.total), np.int64), *past]))
        self.tokens: list = []

    def step(self) -> float:
        t0 = time.perf_counter()
        outs = self.sess.run(None, self.feed)
        elapsed = time.perf_counter() - t0
        nxt = int(outs[0][0, -1].argmax())
        self.tokens.append(nxt)
        self.total += 1
        self.feed = dict(zip(self.names, [np.array([[nxt]], np.int64), np.ones((1, self.total), np.int64), *outs[1:]]))
        return elapsed


def sessions(path: Path, one_thread: bool = True):
    import onnxruntime as ort

    import onnxkit

    so = onnxkit.SessionOptions()
    oso = ort.SessionOptions()
    if one_thread:
        so.intra_op_num_threads = 1
        oso.intra_op_num_threads = oso.inter_op_num_threads = 1
    mine = onnxkit.InferenceSession(str(path), so)
    theirs = ort.InferenceSession(str(path), oso, providers=["CPUExecutionProvider"])
    return mine, theirs


def compare(path: Path, tokens: int, one_thread: bool = True) -> dict:
    mine, theirs = sessions(path, one_thread)
    a, b = Decoder(mine), Decoder(theirs)
    ta, tb = [], []
    for t in range(tokens):
        if t % 2:
            tb.append(b.step())
            ta.append(a.step())
        else:
            ta.append(a.step())
            tb.append(b.step())
    early = slice(11, 31)
    late = slice(tokens - 20, tokens)
    med = lambda xs, s: statistics.median(xs[s]) * 1e3  # noqa: E731
    return dict(early=(med(ta, early), med(tb, early)), late=(med(ta, late), med(tb, late)),
                worst=(max(ta[1:]) * 1e3, max(tb[1:]) * 1e3), prefill=(ta[0] * 1e3, tb[0] * 1e3),
                same=a.tokens == b.tokens, planned=getattr(mine._specializer, "planned", None))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--out", type=Path, default=ROOT / ".cache" / "decoders")
    parser.add_argument("-k", choices=sorted(SIZES), action="append")
    parser.add_argument("--policy", choices=("warm", "tiered", "second"), default=None)
    parser.add_argument("--threads", choices=("1", "default"), default="1")
    args = parser.parse_args()
    if args.policy:
        os.environ["ONNXKIT_FIRST_RUN"] = args.policy
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import onnxruntime

    import timing  # noqa: F401  (ONNXKIT_FIRST_RUN=warm unless set)

    print(f"onnxruntime {onnxruntime.__version__}, numpy {np.__version__}, policy {os.environ['ONNXKIT_FIRST_RUN']}, "
          f"threads {args.threads}, OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}, "
          f"{os.cpu_count()} CPUs, "
          f"{args.tokens} tokens after an {PROMPT}-token prompt; ms per token, medians")
    print(f"{'model':8s} {'early':>15s} {'late':>15s} {'ratio e/l':>11s} {'late/early':>10s} {'worst':>15s} "
          f"{'prefill':>15s} tokens plans")
    for size in args.k or sorted(SIZES, reverse=True):
        r = compare(export_llama(args.out / f"llama_{size}.onnx", size), args.tokens, args.threads == "1")
        (ea, eb), (la, lb), (wa, wb), (pa, pb) = r["early"], r["late"], r["worst"], r["prefill"]
        print(f"{size:8s} {ea:7.3f}/{eb:7.3f} {la:7.3f}/{lb:7.3f} {ea / eb:5.2f}/{la / lb:5.2f} {la / ea:10.2f} "
              f"{wa:7.1f}/{wb:7.1f} {pa:7.1f}/{pb:7.1f} {'equal' if r['same'] else 'DIFFER'} {r['planned']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
