"""Inference over every node model of the ONNX 1-3 test package.

Each graph output is made an intermediate (the producing node's output renamed, an Identity
to the old name added), the model is inferred, and the intermediate's inferred type is
compared with the expected output value (``test_data_set_0/output_K.pb``):

* **contradiction** (the hard requirement, Clause 9.4): an inferred element type, rank or
  static extent that the expected value contradicts.  There must be none.
* **exact**: element type known and equal, shape known and fully static and equal.

The same is done with ``onnx.shape_inference.infer_shapes(strict_mode=True, data_prop=True)``
as an oracle (test only), to count where onnx is exact and onnxkit is not.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pytest

import conformance_figures as figures
import onnxkit
from onnxkit import ir
from onnxkit.dtypes import from_numpy_dtype
from onnxkit.inference import infer_model

SUFFIX = "__onnxkit_inferred"


def _prepare(model: ir.Model):
    """Rename the producers of graph outputs; returns {intermediate name: output index}."""
    g = model.graph
    producers = {}
    for node in g.node:
        for k, o in enumerate(node.output):
            if o:
                producers[o] = (node, k)
    mapping = {}
    for idx, vi in enumerate(g.output):
        if vi.name not in producers:
            continue
        node, k = producers[vi.name]
        new = vi.name + SUFFIX
        node.output[k] = new
        g.node.append(ir.Node(input=[new], output=[vi.name], op_type="Identity", name=f"identity_{idx}{SUFFIX}"))
        mapping[new] = idx
    return mapping


def _expected_signature(value):
    """(kind, elem tag, shape) of an expected value; for sequences a list of element signatures."""
    if isinstance(value, np.ndarray):
        try:
            tag = int(from_numpy_dtype(value.dtype).tag)
        except Exception:
            tag = 0
        return ("tensor", tag, tuple(value.shape))
    if isinstance(value, list):
        return ("sequence", [_expected_signature(v) for v in value])
    if value is None:
        return ("none",)
    if isinstance(value, dict):
        return ("map",)
    return ("other",)


def _check_tensor(elem, dims, sig):
    """(contradiction message or None, exact?) for an inferred tensor (elem, dims or None) vs a signature."""
    if sig[0] != "tensor":
        return (f"inferred a tensor, expected {sig[0]}", False)
    _, tag, shape = sig
    if elem and tag and elem != tag:
        return (f"element type {elem} but expected {tag}", False)
    if dims is not None:
        if len(dims) != len(shape):
            return (f"rank {len(dims)} {dims} but expected shape {shape}", False)
        for d, s in zip(dims, shape):
            if isinstance(d, int) and d != s:
                return (f"shape {dims} but expected {shape}", False)
    exact = bool(elem) and elem == tag and dims is not None and all(isinstance(d, int) for d in dims)
    return (None, exact)


def check_onnxkit(t, sig):
    if t is None:
        return (None, False)
    if isinstance(t, ir.TensorType):
        return _check_tensor(t.elem_type, None if t.shape is None else list(t.shape.values), sig)
    if isinstance(t, ir.SequenceType):
        if sig[0] != "sequence":
            return (f"inferred a sequence, expected {sig[0]}", False)
        if not isinstance(t.elem_type, ir.TensorType):
            return (None, False)
        exact = True
        for s in sig[1]:
            bad, ex = check_onnxkit(t.elem_type, s)
            if bad:
                return ("sequence element: " + bad, False)
            exact &= ex or (bool(t.elem_type.elem_type) and t.elem_type.elem_type == s[1])
        return (None, exact and bool(t.elem_type.elem_type))
    if isinstance(t, ir.OptionalType):
        if sig[0] == "none":
            return (None, t.elem_type is not None)
        return check_onnxkit(t.elem_type, sig)
    return (None, False)


def check_onnx(tp, sig):
    """The same for an onnx TypeProto (oracle)."""
    if tp is None:
        return (None, False)
    which = tp.WhichOneof("value")
    if which == "tensor_type":
        tt = tp.tensor_type
        dims = None
        if tt.HasField("shape"):
            dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim]
        return _check_tensor(tt.elem_type, dims, sig)
    if which == "sequence_type":
        if sig[0] != "sequence":
            return (None, False)
        et = tp.sequence_type.elem_type
        if et.WhichOneof("value") != "tensor_type":
            return (None, False)
        exact = True
        for s in sig[1]:
            bad, ex = check_onnx(et, s)
            exact &= ex or (et.tensor_type.elem_type and et.tensor_type.elem_type == s[1])
        return (None, bool(exact) and bool(et.tensor_type.elem_type))
    if which == "optional_type":
        if sig[0] == "none":
            return (None, True)
        return check_onnx(tp.optional_type.elem_type, sig)
    return (None, False)


def _onnx_types(path: Path):
    import onnx
    from onnx import helper, shape_inference

    m = onnx.load(str(path))
    g = m.graph
    producers = {}
    for node in g.node:
        for k, o in enumerate(node.output):
            if o:
                producers[o] = (node, k)
    names = []
    for idx, vi in enumerate(list(g.output)):
        if vi.name not in producers:
            continue
        node, k = producers[vi.name]
        node.output[k] = vi.name + SUFFIX
        g.node.append(helper.make_node("Identity", [vi.name + SUFFIX], [vi.name]))
        names.append(vi.name + SUFFIX)
    try:
        inferred = shape_inference.infer_shapes(m, strict_mode=True, data_prop=True)
    except Exception:
        try:
            inferred = shape_inference.infer_shapes(m, data_prop=True)
        except Exception:
            return {}
    return {vi.name: vi.type for vi in inferred.graph.value_info}


def _symbolic_inputs(model: ir.Model, ds: Path) -> dict:
    """Replace every static extent of the graph's tensor inputs by a variable of its own; returns
    {variable: the extent it has in test_data_set_0} (unknown extents stay unknown)."""
    binding = {}
    inits = {t.name for t in model.graph.initializer}
    for i, vi in enumerate(model.graph.input):
        t = vi.type
        if vi.name in inits or not isinstance(t, ir.TensorType) or t.shape is None:
            continue
        value = onnxkit.load_value(ds / f"input_{i}.pb", type=t)  # every input of the package loads
        if not isinstance(value, np.ndarray) or value.ndim != len(t.shape):
            continue
        dims = []
        for k, d in enumerate(t.shape.dim):
            name = f"sym_{i}_{k}"
            binding[name] = int(value.shape[k])
            dims.append(name)
        vi.type = ir.TensorType(t.elem_type, dims)
    return binding


def _check_variables(t, sig, binding: dict, fresh: dict):
    """A variable of the inputs must have its bound extent; a fresh one the same extent everywhere."""
    if not isinstance(t, ir.TensorType) or t.shape is None or sig[0] != "tensor" or len(t.shape) != len(sig[2]):
        return None
    for d, actual in zip(t.shape.values, sig[2]):
        if isinstance(d, str):
            if d in binding and binding[d] != actual:
                return f"variable {d} is {binding[d]} in the inputs but the output extent is {actual}"
            if d not in binding and fresh.setdefault(d, actual) != actual:
                return f"fresh variable {d} stands for both {fresh[d]} and {actual}"
    return None


def _expected_value(stats: dict, case: str, idx: int, out: Path, declared):
    """The expected output ``idx`` of ``case`` (None when there is no file); a file that cannot be
    loaded is recorded in ``stats["unloadable"]`` by name (the figures bound that set)."""
    if not out.exists():
        return None
    try:
        return onnxkit.load_value(out, type=declared)
    except Exception as exc:
        stats["unloadable"].append(f"{case}:output_{idx}")
        stats.setdefault("unloadable_reasons", []).append(f"{case} output {idx}: {exc}")
        return None


def run_symbolic(root: Path, limit=None):
    """Every input extent made a variable: nothing inferred may contradict the expected outputs."""
    cases = sorted((root / "node").glob("*/model.onnx"))[:limit]
    stats = {"outputs": 0, "exact": 0, "contradictions": [], "unloadable": []}
    for path in cases:
        ds = path.parent / "test_data_set_0"
        model = onnxkit.load(path)
        declared = [vi.type for vi in model.graph.output]
        binding = _symbolic_inputs(model, ds)
        for vi in model.graph.output:  # declared output shapes are not what is checked here
            if isinstance(vi.type, ir.TensorType):
                vi.type = ir.TensorType(vi.type.elem_type, None)
        mapping = _prepare(model)
        result = infer_model(model)
        stats["contradictions"] += [f"{path.parent.name}: {d}" for d in result.errors]
        fresh: dict = {}
        for name, idx in mapping.items():
            value = _expected_value(stats, path.parent.name, idx, ds / f"output_{idx}.pb", declared[idx])
            if value is None:
                continue
            sig = _expected_signature(value)
            stats["outputs"] += 1
            t = result.type_of(name)
            bad, exact = check_onnxkit(t, sig)
            bad = bad or _check_variables(t, sig, binding, fresh)
            if bad:
                stats["contradictions"].append(f"{path.parent.name} output {idx}: {bad} (inferred {t})")
            stats["exact"] += bool(exact)
    return stats


def run_vectors(root: Path, limit=None, verbose=False):
    cases = sorted((root / "node").glob("*/model.onnx"))[:limit]
    stats = {"outputs": 0, "exact": 0, "onnx_exact": 0, "onnx_only": 0, "contradictions": [], "onnx_only_cases": [],
             "models": len(cases), "inference_errors": [], "unloadable": []}
    for path in cases:
        case = path.parent
        ds = case / "test_data_set_0"
        model = onnxkit.load(path)
        declared = [vi.type for vi in model.graph.output]
        mapping = _prepare(model)
        result = infer_model(model)
        for d in result.errors:
            stats["inference_errors"].append(f"{case.name}: {d}")
        onnx_types = None
        for name, idx in mapping.items():
            value = _expected_value(stats, path.parent.name, idx, ds / f"output_{idx}.pb", declared[idx])
            if value is None:
                continue
            sig = _expected_signature(value)
            stats["outputs"] += 1
            bad, exact = check_onnxkit(result.type_of(name), sig)
            if bad:
                stats["contradictions"].append(f"{case.name} output {idx}: {bad} (inferred {result.type_of(name)})")
            stats["exact"] += bool(exact)
            if onnx_types is None:
                onnx_types = _onnx_types(path)
            _, oexact = check_onnx(onnx_types.get(name), sig)
            stats["onnx_exact"] += bool(oexact)
            if oexact and not exact:
                stats["onnx_only"] += 1
                stats["onnx_only_cases"].append(f"{case.name} output {idx}: onnxkit {result.type_of(name)}")
    return stats


def test_node_vectors(onnx_vectors_dir, capsys):
    pytest.importorskip("onnx")
    t0 = time.time()
    stats = run_vectors(onnx_vectors_dir)
    elapsed = time.time() - t0
    with capsys.disabled():
        print(f"\n[inference vectors] {stats['models']} models, {stats['outputs']} outputs: onnxkit exact "
              f"{stats['exact']}, onnx exact {stats['onnx_exact']}, onnx exact where onnxkit is not "
              f"{stats['onnx_only']}, contradictions {len(stats['contradictions'])}, "
              f"inference errors {len(stats['inference_errors'])} ({elapsed:.1f} s)")
    assert not stats["contradictions"], "\n".join(stats["contradictions"][:50])
    assert not stats["inference_errors"], "\n".join(stats["inference_errors"][:50])
    assert_named(stats["unloadable"], "inference.unloadable_values", "\n".join(stats.get("unloadable_reasons", [])))
    assert_figures(stats, {"outputs": "outputs", "exact": "exact", "onnx_exact": "onnx_exact",
                           "onnx_only": "onnx_exact_only"})


def test_node_vectors_with_symbolic_inputs(onnx_vectors_dir, capsys):
    """The same models with every input extent a dimension variable (bound to its extent in the
    test data): an inferred variable must denote the right extent, a static one must be right."""
    pytest.importorskip("onnx")
    stats = run_symbolic(onnx_vectors_dir)
    with capsys.disabled():
        print(f"\n[inference vectors, symbolic inputs] {stats['outputs']} outputs: exact {stats['exact']}, "
              f"contradictions {len(stats['contradictions'])}")
    assert not stats["contradictions"], "\n".join(stats["contradictions"][:50])
    assert_named(stats["unloadable"], "inference.unloadable_values", "\n".join(stats.get("unloadable_reasons", [])))
    assert_figures(stats, {"outputs": "outputs", "exact": "symbolic_exact"})


#: Values where onnx's ReferenceEvaluator itself is off, as "model:value" (its Loop stacks scalar
#: scan outputs as [N, 1]; the test package's expected output, checked above, is [N]): not
#: compared.  A named set of onnxkit/statement/conformance_figures.json, its size asserted and in docs/conformance.md.
REFERENCE_QUIRKS = figures.named_set("inference.reference_quirks")
#: Node models the ReferenceEvaluator cannot run (string kernels that do not take octet strings,
#: no Scatter, a Scan it fails on): left out of the comparison, by name.
REFERENCE_UNEVALUABLE = figures.named_set("inference.reference_unevaluable")


def run_reference_intermediates(root: Path, limit=None):
    """Every node output of every node model, evaluated by onnx's ReferenceEvaluator on
    test_data_set_0: the inferred type of each must not contradict the value computed."""
    import onnx
    from onnx.reference import ReferenceEvaluator

    stats = {"values": 0, "exact": 0, "unevaluable": [], "quirks": [], "contradictions": []}
    for path in sorted((root / "node").glob("*/model.onnx"))[:limit]:
        case = path.parent.name
        kit = onnxkit.load(path)
        proto = onnx.load(str(path))
        declared = {o.name for o in proto.graph.output}
        names = [o for n in proto.graph.node for o in n.output if o]
        for name in names:
            if name not in declared:
                proto.graph.output.append(onnx.ValueInfoProto(name=name))
        try:
            feeds = {vi.name: onnxkit.load_value(path.parent / "test_data_set_0" / f"input_{i}.pb", type=vi.type)
                     for i, vi in enumerate(kit.graph.input)}
            with np.errstate(all="ignore"):
                values = ReferenceEvaluator(proto).run(None, feeds)
        except Exception:
            stats["unevaluable"].append(case)
            continue
        result = infer_model(kit)
        for vi, value in zip(proto.graph.output, values):
            t = result.type_of(vi.name)
            if not isinstance(value, np.ndarray) or value.dtype == object:
                continue
            stats["values"] += 1
            bad, exact = check_onnxkit(t, _expected_signature(value))
            stats["exact"] += bool(exact)
            if bad and f"{case}:{vi.name}" in REFERENCE_QUIRKS:
                stats["quirks"].append(f"{case}:{vi.name}")
            elif bad:
                stats["contradictions"].append(f"{case} value {vi.name!r}: {bad} (inferred {t})")
    return stats


def test_node_vectors_intermediates_against_reference_evaluation(onnx_vectors_dir, capsys):
    pytest.importorskip("onnx.reference")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        stats = run_reference_intermediates(onnx_vectors_dir)
    with capsys.disabled():
        print(f"\n[inference vectors, every intermediate vs onnx.reference] {stats['values']} values: exact "
              f"{stats['exact']}, contradictions {len(stats['contradictions'])} ({len(stats['unevaluable'])} models "
              f"not evaluable)")
    assert not stats["contradictions"], "\n".join(stats["contradictions"][:50])
    assert_named(stats["unevaluable"], "inference.reference_unevaluable")
    assert_named(stats["quirks"], "inference.reference_quirks")
    assert_figures(stats, {"values": "reference_values", "exact": "reference_exact"})


def assert_named(found: list, dotted: str, reasons: str = "") -> None:
    """The names ``found`` left out of a check are exactly the figures' set ``dotted``, whose size
    is as stated: a name new to the set, or one no longer left out, fails by name."""
    expected = figures.named_set(dotted)
    assert len(expected) == figures.count(dotted), f"{dotted}: the stated count is not the number of names"
    new, gone = sorted(set(found) - expected), sorted(expected - set(found))
    assert not new and not gone and len(found) == len(set(found)), (
        f"{dotted} in onnxkit/statement/conformance_figures.json: newly left out {new}, no longer left out {gone} (update the "
        f"set and its count, then run {figures.WRITE_README}){chr(10) + reasons if reasons else ''}")


def assert_figures(stats: dict, keys: dict) -> None:
    """Each count of ``stats`` equals its figure (``keys``: stats key -> key of the figures' inference entry)."""
    stated = figures.entry("inference")
    found = {key: stats[key] for key in keys}
    want = {key: stated[figure] for key, figure in keys.items()}
    assert found == want, (f"inference counts {found} differ from onnxkit/statement/conformance_figures.json {want}: update "
                           f"the figures, then run {figures.WRITE_README}")


if __name__ == "__main__":  # python tests/inference/test_vectors.py [LIMIT]: the full lists
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from onnx_vectors import ensure_vectors

    s = run_vectors(ensure_vectors(), int(sys.argv[1]) if len(sys.argv) > 1 else None)
    sym = run_symbolic(ensure_vectors(), int(sys.argv[1]) if len(sys.argv) > 1 else None)
    print(f"== symbolic: {sym['outputs']} outputs, exact {sym['exact']}")
    for line in sym["contradictions"]:
        print("   SYM", line)
    for key in ("contradictions", "inference_errors", "onnx_only_cases"):
        print(f"== {key} ({len(s[key])})")
        for line in s[key]:
            print("  ", line)
    print({k: v for k, v in s.items() if not isinstance(v, list)})
