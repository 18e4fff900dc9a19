"""Write docs/contrib_operators.md: every CPU kernel onnxruntime registers in its com.microsoft*
domains, with what onnxkit does with that operator.

    python tools/contrib_table.py           # rewrite the page
    python tools/contrib_table.py --check   # exit 1 when the page differs from what it would write

onnxruntime (the installed version, 1.32 when the page was written) is read through
``onnxruntime.capi.onnxruntime_pybind11_state.get_all_opkernel_def()``, filtered to
``CPUExecutionProvider`` and the domains starting with ``com.microsoft``; onnxkit through its
registry (every installed plugin).  An operator onnxkit defines is listed with its kernels (``cpu``,
``gpu`` or the gpu backend's per-node fallback); one it does not define is listed "not supported"
with the reason recorded in :data:`REASONS` / :data:`NCHWC_REASONS` (a missing reason is an error: a new onnxruntime kernel
gets one when the page is regenerated).  plugins/microsoft_domain/tests/test_contrib_table.py fails
while the committed page differs from this tool's output.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "docs" / "contrib_operators.md"

_LOOP = "a generation loop over decoder subgraphs (GRAPH attributes) with its own search state"
_PRE = "com.microsoft's predecessor of ai.onnx {} (exporters write the ai.onnx operator today)"
_NEW = "a recent onnxruntime kernel no exporter of onnxkit's corpus writes yet"
_NCHWC = "an NCHWc blocked-layout form onnxruntime's optimizer writes at load time, never saved by exporters"

#: why onnxkit does not define an operator onnxruntime's CPU provider has a kernel for
REASONS = {
    "AttnLSTM": "an LSTM with attention written by no current exporter",
    "BeamSearch": _LOOP,
    "BifurcationDetector": "speculative decoding's draft check, written only by onnxruntime's own tools",
    "BranchwiseRMSNorm": _NEW,
    "CausalConvWithState": _NEW,
    "ConvTransposeWithDynamicPads": "ConvTranspose with pads as an input, from old converters",
    "CropAndResize": "TensorFlow's crop_and_resize (tf2onnx's contrib form)",
    "DynamicTimeWarping": "Whisper's timestamp alignment (onnxruntime's Whisper export)",
    "EngramGate": _NEW,
    "ExpandDims": "TensorFlow's expand_dims (ai.onnx Unsqueeze computes it)",
    "GatedAdd": _NEW,
    "GatedDeltaNet": _NEW,
    "GatedRMSNorm": _NEW,
    "GatherND": _PRE.format("GatherND"),
    "GatherPacked": _NEW,
    "GreedySearch": _LOOP,
    "GridSample": _PRE.format("GridSample"),
    "HyperConnectionPostMix": _NEW,
    "HyperConnectionPreMix": _NEW,
    "Inverse": "a matrix inverse (no ai.onnx operator)",
    "LinearAttention": _NEW,
    "LinearAttentionGate": _NEW,
    "MRotaryEmbedding": _NEW,
    "MatMulFpQ4": "the older blockwise 4-bit MatMul MatMulNBits replaced",
    "MatMulInteger16": "a 16-bit integer MatMul written by no current exporter",
    "MaxpoolWithMask": "MaxPool with a mask input, from old converters",
    "MoEGroupRouter": _NEW,
    "NGramHashMapping": _NEW,
    "NGramRepeatBlock": "the n-gram repeat blocker of onnxruntime's generation graphs",
    "NhwcMaxPool": "an NHWC layout form onnxruntime's optimizer writes at load time, never saved by exporters",
    "Pad": _PRE.format("Pad"),
    "QEmbedLayerNormalization": "a quantized EmbedLayerNormalization from onnxruntime's BERT quantization",
    "Range": _PRE.format("Range"),
    "SampleOp": "onnxruntime's example kernel (no model uses it)",
    "Sampling": _LOOP,
    "ScaledSiLU": _NEW,
    "TransposeMatMul": "the older name of FusedMatMul (onnxkit implements FusedMatMul)",
    "Trilu": _PRE.format("Trilu"),
    "UnfoldTensor": _NEW,
    "Unique": _PRE.format("Unique"),
    "VarlenCausalConvWithState": _NEW,
    "VarlenNGramHashMapping": _NEW,
    "WhisperBeamSearch": _LOOP,
    "WordConvEmbedding": "a character-CNN word embedding written by no current exporter",
}
#: the same for com.microsoft.nchwc
NCHWC_REASONS = dict.fromkeys(("AveragePool", "Conv", "GlobalAveragePool", "GlobalMaxPool", "MaxPool", "ReorderInput",
                               "ReorderOutput", "Upsample"), _NCHWC)


def onnxruntime_kernels() -> dict:
    """``{(domain, op): {"versions": set of (start, end), "types": {constraint: set of types}}}``."""
    from onnxruntime.capi import onnxruntime_pybind11_state as C

    found: dict = defaultdict(lambda: {"versions": set(), "types": defaultdict(set)})
    for k in C.get_all_opkernel_def():
        if k.provider != "CPUExecutionProvider" or not k.domain.startswith("com.microsoft"):
            continue
        entry = found[(k.domain, k.op_name)]
        entry["versions"].add(tuple(k.version_range))
        for name, types in k.type_constraints.items():
            entry["types"][name].update(types)
    return dict(found)


def _versions(ranges) -> str:
    return ", ".join(str(a) if b >= 2 ** 31 - 1 or b == a else f"{a}-{b}" for a, b in sorted(ranges))


def _types(types: dict) -> str:
    parts = []
    for name in sorted(types):
        short = sorted(t.replace("tensor(", "").rstrip(")") if t.startswith("tensor(") else t for t in types[name])
        parts.append(f"{name}: {', '.join(short)}")
    return "; ".join(parts)


def onnxkit_status(reg, domain: str, op: str, start: int) -> str:
    schema = None
    for version in sorted({v for d, v in reg.operator_sets if d == domain}, reverse=True):
        schema = reg.bind(domain, op, version)
        if schema is not None:
            break
    if schema is None:
        reason = (NCHWC_REASONS if domain == "com.microsoft.nchwc" else REASONS).get(op)
        if reason is None:
            raise SystemExit(f"{domain} {op}: onnxkit defines no such operator and REASONS gives no reason")
        return f"not supported ({reason})"
    since = int(schema.since_version)
    cpu = reg.kernel("cpu", domain, op, since) is not None
    gpu = reg.kernel("gpu", domain, op, since) is not None
    if not cpu:
        return "defined, no kernel (not supported)"
    return "kernel: cpu, gpu" if gpu else "kernel: cpu; gpu through the per-node fallback"


def render() -> str:
    import onnxruntime

    from onnxkit.registry import build_registry

    reg = build_registry()
    kernels = onnxruntime_kernels()
    rows = []
    supported = 0
    for (domain, op), entry in sorted(kernels.items()):
        start = min(a for a, _ in entry["versions"])
        status = onnxkit_status(reg, domain, op, start)
        supported += status.startswith("kernel")
        rows.append(f"| {domain} | `{op}` | {_versions(entry['versions'])} | {_types(entry['types'])} | {status} |")
    head = [
        "# onnxruntime's contrib kernels",
        "",
        "<!-- generated by `python tools/contrib_table.py`; do not edit "
        "(plugins/microsoft_domain/tests/test_contrib_table.py keeps it equal to the tool's output) -->",
        "",
        f"Every CPU kernel onnxruntime {onnxruntime.__version__} registers in its `com.microsoft` domains "
        f"({len(kernels)} operators), and what onnxkit does with each: {supported} run on onnxkit's kernels, "
        f"{len(kernels) - supported} are not supported (why, per operator).  The kernels compute what "
        "onnxruntime's CPU kernels compute, including the forms onnxkit refuses by name and the few places "
        "it departs from onnxruntime on purpose, which the com.microsoft plugin's README lists.  "
        "`gpu` lists the backend's own kernel; \"through the per-node fallback\" means the node runs on "
        "`cpu` within a `gpu` session (the conformance statement's fallback rule).",
        "",
        "| domain | operator | onnxruntime CPU versions | onnxruntime CPU types | onnxkit |",
        "|---|---|---|---|---|",
    ]
    return "\n".join(head + rows) + "\n"


def main(argv: list) -> int:
    text = render()
    if "--check" in argv:
        return 0 if OUT.exists() and OUT.read_text() == text else 1
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
