"""Running one model on the four evaluators and judging onnxkit's answers.

:func:`check` runs a model (an ``onnx.ModelProto``) through the runs of :func:`runs_of`:

0. the first shape variant, fresh feeds (some fed as views: transposed, strided, read-only
   broadcasts);
1. the second shape variant (other extents for the symbolic dimensions: 0 and 1 among them);
2. the first variant again with the *same* feed objects whose bases were overwritten in place
   (a kernel caching what it saw by identity gives stale results);
3. where the model is IR < 4 and names initializers to override: the first variant with those
   initializers fed (onnxruntime refuses such feeds, so its oracle is the model with those
   initializers turned into plain inputs).

After every onnxkit run each output array is overwritten (a later run must not change:
an output aliasing a plan constant shows in run 2).  onnxkit runs with default options and with
``ORT_DISABLE_ALL``; onnxruntime with its optimizer off is the oracle; where onnxkit and
onnxruntime disagree, ``onnx.reference`` breaks the tie (onnxkit agreeing with it is an
exclusion, :mod:`.exclusions`, not a failure); where onnxruntime cannot run the model the
reference is the oracle.  A :class:`Verdict` says what happened.
"""

from __future__ import annotations

import warnings
from typing import Optional

from onnxkit import records
import numpy as np
import onnx

from .build import feeds_for, meta
from .agreement import TOLERANCE, agreement, close  # noqa: F401 (the oracle's comparison)
from .exclusions import direct_group_norm, direct_reason, loose_reason, refusal_reason

@records.define
class Verdict:
    """``status``: ``ok``, ``fail`` or ``excluded``; ``kind``: the failure's class (``mismatch``,
    ``error``, ``crash``, ``alias``...), ``reason``: the exclusion's name; ``detail``: one line."""

    status: str
    kind: str = ""
    reason: str = ""
    detail: str = ""
    engine: str = ""

    @property
    def key(self) -> tuple:
        """What a minimized model must keep failing with."""
        return (self.status, self.kind, self.engine)


def runs_of(model: onnx.ModelProto, rng: np.random.Generator) -> list:
    """``[(label, {name: Feed}, override names)]``: the runs of the module docstring."""
    info = meta(model)
    first = feeds_for(model, rng, 0)
    second = feeds_for(model, rng, 1 if info["dims"] else 0)
    runs = [("variant 0", first, ()), ("variant 1", second, ()), ("variant 0 refilled in place", first, ())]
    if info["overrides"] and model.ir_version < 4:
        fed = feeds_for(model, rng, 0, overrides=True)
        runs.append(("variant 0 with IR<4 overrides", fed, tuple(n for n in info["overrides"] if n in fed)))
    return runs


def _plain(model: onnx.ModelProto, overridden) -> bytes:
    """``model`` for onnxruntime: the initializers in ``overridden`` made plain inputs."""
    if not overridden:
        return model.SerializeToString()
    m = onnx.ModelProto()
    m.CopyFrom(model)
    keep = [t for t in m.graph.initializer if t.name not in overridden]
    del m.graph.initializer[:]
    m.graph.initializer.extend(keep)
    return m.SerializeToString()


class _Ort:
    def __init__(self, model: onnx.ModelProto):
        self.model = model
        self.sessions: dict = {}

    def run(self, feeds: dict, overridden) -> list:
        import onnxruntime as ort

        key = tuple(sorted(overridden))
        if key not in self.sessions:
            so = ort.SessionOptions()
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            so.log_severity_level = 4
            self.sessions[key] = ort.InferenceSession(_plain(self.model, overridden), so,
                                                      providers=["CPUExecutionProvider"])
        return self.sessions[key].run(None, {k: np.array(v, order="C", copy=True) for k, v in feeds.items()})


def as_float32(model: onnx.ModelProto) -> Optional[onnx.ModelProto]:
    """``model`` with every float64 tensor, type and Cast made float32 (None if it has none): the
    oracle where onnxruntime has no float64 kernel (onnx.reference's float64 kernels are not all
    exact: its Erf is float32-accurate, its Conv/BatchNormalization and LpPool disagreed)."""
    D, F = onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT
    m = onnx.ModelProto()
    m.CopyFrom(model)
    changed = False

    def tensor(t):
        nonlocal changed
        if t.data_type == D:
            arr = onnx.numpy_helper.to_array(t).astype(np.float32)
            t.CopyFrom(onnx.numpy_helper.from_array(arr, t.name))
            changed = True

    def typ(vi):
        nonlocal changed
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type == D:
            vi.type.tensor_type.elem_type = F
            changed = True

    def graph(g):
        nonlocal changed
        for t in g.initializer:
            tensor(t)
        for vi in list(g.input) + list(g.output) + list(g.value_info):
            typ(vi)
        for n in g.node:
            for a in n.attribute:
                if a.type == onnx.AttributeProto.TENSOR:
                    tensor(a.t)
                elif a.type == onnx.AttributeProto.GRAPH:
                    graph(a.g)
                elif a.name in ("to", "dtype") and a.type == onnx.AttributeProto.INT and a.i == D:
                    a.i = F
                    changed = True
    graph(m.graph)
    return m if changed else None


def _reference(model: onnx.ModelProto, feeds: dict, overridden) -> list:
    from onnx.reference import ReferenceEvaluator

    m = onnx.load_from_string(_plain(model, overridden))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = ReferenceEvaluator(m)
        return [np.asarray(v) for v in ref.run(None, {k: np.array(v, order="C", copy=True) for k, v in feeds.items()})]


def _scribble(values: list) -> None:
    """Overwrite every writable output array (the caller owns them; nothing later may change)."""
    for v in values:
        if isinstance(v, np.ndarray) and v.flags.writeable and v.size:
            if v.dtype.kind == "b":
                v[...] = ~v
            elif v.dtype.kind in "iuf":
                v[...] = 99
            elif v.dtype.kind == "O":
                v[...] = "scribbled"


def _onnxkit(data: bytes, optimize: bool):
    import onnxkit
    from onnxkit.runtime.options import GraphOptimizationLevel

    from onnxkit.runtime.optimizer import OPT_IN

    so = onnxkit.SessionOptions()
    if not optimize:
        so.graph_optimization_level = GraphOptimizationLevel.ORT_DISABLE_ALL
    else:   # the opt-in passes too: every rewrite is checked against the unoptimized plan
        so.add_session_config_entry("session.enable_passes", ",".join(sorted(OPT_IN)))
    return onnxkit.InferenceSession(data, so)


def _outcome(fn):
    """``(values, None)`` or ``(None, exception)``."""
    try:
        return fn(), None
    except Exception as exc:  # noqa: BLE001 - what a run raises is judged, not hidden
        return None, exc


def _is_onnxkit_error(exc) -> bool:
    from onnxkit.errors import OnnxkitError

    return isinstance(exc, OnnxkitError)


def _describe(exc) -> str:
    return f"{type(exc).__name__}: {' | '.join(str(exc).splitlines()[:3])}"[:400]


def _random_ok(model, info, label, feeds, got: list, want: list, names: list) -> Optional[str]:
    """The property a random output (Dropout in training) must have: each element 0 or x / (1 - r)."""
    for entry in info["random"]:
        if entry.get("output") not in names:
            continue
        k = names.index(entry["output"])
        g, w = np.asarray(got[k]), np.asarray(want[k])
        if g.shape != w.shape or g.dtype != w.dtype:
            return f"{label}: random output {entry['output']}: {g.shape}/{g.dtype} != {w.shape}/{w.dtype}"
        x = feeds.get(entry.get("input"))
        if x is None or entry.get("ratio") is None:
            continue
        x = np.asarray(x.value).astype(np.float64)
        r = float(entry["ratio"])
        scaled = x / (1.0 - r) if r < 1 else np.zeros_like(x)
        g64 = g.astype(np.float64)
        ok = ~np.isfinite(x) & ~np.isfinite(g64) | (g64 == 0) | np.isclose(g64, scaled, rtol=4e-3, atol=1e-6, equal_nan=True) | \
            np.isclose(g64, x, rtol=4e-3, atol=1e-6, equal_nan=True)
        if not ok.all():
            return f"{label}: random output {entry['output']}: an element neither 0 nor x nor x/(1-ratio)"
        training = entry.get("training") is True or (entry.get("training") == "fed" and "overrides" in label)
        if training and r >= 0.5 and x.size >= 40 and not (g64 == 0)[(x != 0) & ~np.isnan(x)].any():
            return f"{label}: random output {entry['output']}: training_mode with ratio {r} dropped nothing"
    return None


def check(model: onnx.ModelProto, seed: int, use_reference: bool = True) -> Verdict:
    """Run ``model`` (feeds from ``numpy.random.default_rng([seed, 1])``) and judge onnxkit."""
    data = model.SerializeToString()
    info = meta(model)
    names = [o.name for o in model.graph.output]
    random_names = {e.get("output") for e in info["random"]}
    rng = np.random.default_rng([seed, 1])
    runs = runs_of(model, rng)
    ort = _Ort(model)
    narrow = as_float32(model)
    single = _Ort(narrow) if narrow is not None else None
    excluded: Optional[Verdict] = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sessions = {}
        for mode, optimize in (("default", True), ("ORT_DISABLE_ALL", False)):
            sessions[mode] = _outcome(lambda: _onnxkit(data, optimize))
    for label, feeds, overridden in runs:
        # the expected values of this run (the feeds as they are now: run 2 refilled them)
        if label.endswith("in place"):
            for f in feeds.values():
                f.refill()
        arrays = {k: f.value for k, f in feeds.items()}
        want, ort_exc = _outcome(lambda: ort.run(arrays, overridden))
        oracle = "onnxruntime"
        narrowed = None
        if ort_exc is not None and single is not None:
            narrowed = {k: (v.astype(np.float32) if v.dtype == np.float64 else v) for k, v in arrays.items()}
            want, ort32_exc = _outcome(lambda: single.run(narrowed, overridden))
            if ort32_exc is None:
                oracle = "onnxruntime (float32 copy)"
                ort_exc = None
        if ort_exc is not None:
            if not use_reference:
                return Verdict("excluded", reason="onnxruntime-refuses", detail=_describe(ort_exc))
            want, ref_exc = _outcome(lambda: _reference(model, arrays, overridden))
            if ref_exc is not None:
                return Verdict("excluded", reason="no-oracle", detail=f"{_describe(ort_exc)} / {_describe(ref_exc)}")
            oracle = "onnx.reference"
        results = {}
        for mode, (sess, exc) in sessions.items():
            if exc is not None:
                results[mode] = (None, exc)
            else:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    results[mode] = _outcome(lambda: sess.run(None, arrays))
        for mode, (got, run_exc) in results.items():
            other = results["ORT_DISABLE_ALL" if mode == "default" else "default"][0]
            if run_exc is not None:
                if not _is_onnxkit_error(run_exc):
                    return Verdict("fail", "crash", detail=f"{label}: {_describe(run_exc)}", engine=mode)
                why = refusal_reason(model, run_exc)
                if why:
                    excluded = excluded or Verdict("excluded", reason=why, detail=_describe(run_exc))
                    continue
                return Verdict("fail", "error", detail=f"{label}: {_describe(run_exc)} (where {oracle} runs)",
                               engine=mode)
            for k, name in enumerate(names):
                if name in random_names:
                    continue
                if oracle.endswith("copy)") and np.asarray(got[k]).dtype == np.float64:
                    diff = close(np.asarray(got[k]).astype(np.float32), want[k], loose=True)
                else:
                    diff = close(got[k], want[k])
                if diff is None:
                    continue
                why = loose_reason(model, oracle, want[k])
                if why and close(got[k], want[k], loose=True) is None:
                    excluded = excluded or Verdict("excluded", reason=why, detail=f"{label}: output {name}: {diff}")
                    continue
                if why == "stash-type-float32":
                    exact = direct_group_norm(model, arrays)
                    if exact is not None and close(got[k], exact) is None:
                        excluded = excluded or Verdict("excluded", reason=why, detail=f"{label}: output {name}: {diff}")
                        continue
                why = direct_reason(model, arrays, got[k], want[k])
                if why:
                    excluded = excluded or Verdict("excluded", reason=why, detail=f"{label}: output {name}: {diff}")
                    continue
                if oracle.startswith("onnxruntime") and use_reference:
                    # the tie-break, element by element: every element onnxkit has apart from onnxruntime
                    # must be one where onnx.reference agrees with onnxkit
                    copy = oracle.endswith("copy)")   # then the reference runs the float32 copy too
                    ref, ref_exc = _outcome(lambda: _reference(narrow, narrowed, overridden) if copy
                                            else _reference(model, arrays, overridden))
                    mine = np.asarray(got[k]).astype(np.asarray(want[k]).dtype) if copy else got[k]
                    _, ok_ort = agreement(mine, want[k], loose=copy)
                    problem, ok_ref = (None, None) if ref_exc is not None else agreement(mine, ref[k], loose=copy)
                    if ok_ref is not None and not problem and (ok_ref.all() or (ok_ort is not None and ok_ref[~ok_ort].all())):
                        excluded = excluded or Verdict("excluded", reason="onnxruntime-outvoted",
                                                       detail=f"{label}: output {name}: {diff}")
                        continue
                if oracle == "onnx.reference" and other is not None and close(got[k], other[k]) is None:
                    # onnxruntime refuses this run and onnx.reference alone disagrees with both onnxkit modes
                    excluded = excluded or Verdict("excluded", reason="reference-alone",
                                                   detail=f"{label}: output {name}: {diff}")
                    continue
                return Verdict("fail", "mismatch", detail=f"{label}: output {name!r}: {diff} ({oracle})", engine=mode)
            problem = _random_ok(model, info, label, feeds, got, want, names)
            if problem:
                return Verdict("fail", "random-property", detail=problem, engine=mode)
        for got, _ in results.values():
            if got is not None:
                _scribble(got)
    if excluded is not None:
        return excluded
    if info["random"]:
        return Verdict("excluded", reason=info["random"][0].get("why", "random-output"),
                       detail="outputs of unspecified value: compared by shape and type (and property)")
    return Verdict("ok")


def describe_model(model: onnx.ModelProto) -> str:
    """One line: the node types (in order) and the planted tags."""
    ops = [n.op_type for n in model.graph.node]
    tags = meta(model)["tags"]
    return f"{len(ops)} nodes [{' '.join(ops[:12])}{' ...' if len(ops) > 12 else ''}]" + \
        (f" tags={','.join(tags)}" if tags else "")


__all__ = ["check", "close", "Verdict", "runs_of", "describe_model"]
