"""Running the ONNX 1-3 test vectors: ``onnxkit conformance run DIR``.

A *case* is a folder with ``model.onnx`` and ``test_data_set_N/{input,output}_K.pb`` (the
layout of ``node/``, ``simple/``, ``pytorch-converted/``, ``pytorch-operator/``), or a light
model ``light/light_NAME.onnx`` with its reference ``light_NAME_output_0.pb``, whose inputs are
the fixed dummy data of the ONNX backend runner (``arange(n) / n`` in float32, unknown extents
taken as 1).  Tolerances: the one onnxkit guarantees for the output's element type
(:data:`onnxkit.tolerances.TOLERANCES`; float32 is the harness's rtol 1e-3, atol 1e-7), unless
the case states its own (``real/test_NAME/data.json`` for the light models, ``tolerance.json``
beside a model), which is then used where it is looser than the type's.

Outcomes: ``pass``, ``fail`` (a wrong value), ``unsupported`` (the session refused an
operator, Clause 4.4) and ``error`` (anything else: the message is kept).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Iterable, Optional

from onnxkit import records
import numpy as np

from . import ir
from .api import load, load_value
from .domains import display_domain
from .errors import OnnxkitError, UnsupportedOperatorError
from .log import get_logger
from .tolerances import tolerance_for

#: Operators whose outputs are random: checked for shape, dtype and the values they may take.
RANDOM_CASES = {"bernoulli": {0, 1}}


@records.define
class Case:
    name: str
    model: Path
    data_sets: list                 # [(inputs: [Path], outputs: [Path])] or dummy
    rtol: Optional[float] = None    # None: the element type's guaranteed tolerance
    atol: Optional[float] = None
    dummy_inputs: bool = False


@records.define
class Outcome:
    name: str
    status: str                     # pass | fail | unsupported | error
    message: str = ""
    seconds: float = 0.0


def discover(root: Path) -> list[Case]:
    """Every case under ``root`` (a package folder or one of its sub-folders), sorted by path."""
    root = Path(root)
    cases = []
    for model in sorted(root.rglob("model.onnx")):
        folder = model.parent
        sets = []
        for ds in sorted(folder.glob("test_data_set_*"), key=lambda p: int(p.name.rsplit("_", 1)[1])):
            ins = sorted(ds.glob("input_*.pb"), key=_index)
            outs = sorted(ds.glob("output_*.pb"), key=_index)
            sets.append((ins, outs))
        rtol, atol = _tolerance(folder / "tolerance.json")
        rel = folder.relative_to(root) if folder != root else Path(folder.name)
        cases.append(Case(str(rel), model, sets, rtol, atol))
    for model in sorted(root.rglob("light_*.onnx")):
        name = model.stem[len("light_"):]
        ref = model.with_name(f"{model.stem}_output_0.pb")
        if not ref.exists():
            continue
        rtol, atol = _tolerance(_find_real_json(root, name))
        cases.append(Case(f"light/{name}", model, [([], [ref])], rtol, atol, dummy_inputs=True))
    return cases


def _index(p: Path) -> int:
    return int(p.stem.rsplit("_", 1)[1])


def _find_real_json(root: Path, name: str) -> Optional[Path]:
    for base in (root, root.parent):
        p = base / "real" / f"test_{name}" / "data.json"
        if p.exists():
            return p
    return None


def _tolerance(path: Optional[Path]) -> tuple:
    if path is None or not path.exists():
        return None, None
    data = json.loads(path.read_text())
    rtol, atol = data.get("rtol"), data.get("atol")
    return (None if rtol is None else float(rtol)), (None if atol is None else float(atol))


def dummy_input(vi: ir.ValueInfo) -> np.ndarray:
    """The ONNX backend runner's fixed input for a light model (float32, arange / n)."""
    shape = tuple(d if isinstance(d, int) else 1 for d in vi.type.shape.values)
    n = int(np.prod(shape))
    return (np.arange(n).reshape(shape) / n).astype(np.float32)


def compare(expected, actual, rtol: Optional[float] = None, atol: Optional[float] = None,
            path: str = "output") -> Optional[str]:
    """None if ``actual`` matches ``expected`` within tolerance, else what differs.

    The tolerance is the guaranteed one of the expected value's element type (Clause 11.5,
    :mod:`onnxkit.tolerances`); a stated ``rtol``/``atol`` replaces it where it is looser.
    STRING elements compare exactly, type included: ``expected`` as a session returns it
    (``str``, or ``bytes`` where not valid UTF-8; :func:`onnxkit.runtime.strings.to_text`
    gives that form of the octets a ``.pb`` file holds).
    """
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return f"{path}: expected a sequence, got {type(actual).__name__}"
        if len(expected) != len(actual):
            return f"{path}: expected {len(expected)} elements, got {len(actual)}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            msg = compare(e, a, rtol, atol, f"{path}[{i}]")
            if msg:
                return msg
        return None
    if isinstance(expected, dict):
        if not isinstance(actual, dict) or set(expected) != set(actual):
            return f"{path}: expected a map with keys {sorted(expected)[:5]}..., got {type(actual).__name__}"
        for k in expected:
            msg = compare(expected[k], actual[k], rtol, atol, f"{path}[{k!r}]")
            if msg:
                return msg
        return None
    if expected is None:
        return None if actual is None else f"{path}: expected an absent optional, got {type(actual).__name__}"
    if not isinstance(actual, np.ndarray):
        if actual is None:
            return f"{path}: expected a value, got None"
        actual = np.asarray(actual)
    if expected.shape != actual.shape:
        return f"{path}: shape {list(actual.shape)}, expected {list(expected.shape)}"
    if expected.dtype == object or expected.dtype.kind in "SU":
        for i, (e, a) in enumerate(zip(expected.reshape(-1).tolist(), actual.reshape(-1).tolist())):
            if type(e) is not type(a) or e != a:
                return f"{path}: strings differ; first at flat index {i}: {a!r} vs expected {e!r}"
        return None
    if expected.dtype != actual.dtype:
        return f"{path}: dtype {actual.dtype}, expected {expected.dtype}"
    if expected.dtype.kind in "fc" or expected.dtype.name in ("bfloat16",) or expected.dtype.kind == "V":
        e = expected.astype(np.complex128 if expected.dtype.kind == "c" else np.float64)
        a = actual.astype(e.dtype)
        guaranteed = tolerance_for(expected.dtype)
        r = max(rtol or 0.0, guaranteed.rtol) if rtol is not None else guaranteed.rtol
        t = max(atol or 0.0, guaranteed.atol) if atol is not None else guaranteed.atol
        ok = np.isclose(a, e, rtol=r, atol=t, equal_nan=True)
        if not ok.all():
            i = int(np.argmin(ok.reshape(-1)))
            return (f"{path}: {int((~ok).sum())} of {ok.size} values differ; first at flat index {i}: "
                    f"{a.reshape(-1)[i]} vs expected {e.reshape(-1)[i]}")
        return None
    if np.issubdtype(expected.dtype, np.number) or expected.dtype == bool:
        if not np.array_equal(expected, actual):
            i = int(np.argmax((expected != actual).reshape(-1)))
            return f"{path}: values differ; first at flat index {i}: {actual.reshape(-1)[i]} vs {expected.reshape(-1)[i]}"
        return None
    # narrow ml_dtypes integer types compare by value, exactly
    e, a = expected.astype(np.float64), actual.astype(np.float64)
    return None if np.array_equal(a, e, equal_nan=True) else f"{path}: values differ"


def run_case(case: Case, backend: str = "cpu", registry=None) -> Outcome:
    from .runtime import InferenceSession
    from .runtime.strings import to_text

    t0 = time.perf_counter()
    if not case.data_sets or not all(outputs for _, outputs in case.data_sets):
        return Outcome(case.name, "error", "no test data: a case needs test_data_set_*/ folders, each with "
                       "output_*.pb files, to be compared (nothing was checked)", 0.0)
    try:
        model = load(case.model)
        sess = InferenceSession(model, backend, registry=registry)
        graph = model.graph
        init = {t.name for t in graph.initializer}
        fed = [vi for vi in graph.input if vi.name not in init] if case.dummy_inputs else list(graph.input)
        random_values = next((v for k, v in RANDOM_CASES.items() if k in case.name), None)
        for inputs, outputs in case.data_sets:
            if case.dummy_inputs:
                feed = {vi.name: dummy_input(vi) for vi in fed}
            else:
                feed = {fed[i].name: load_value(p, type=fed[i].type) for i, p in enumerate(inputs)}
            got = sess.run(None, feed)
            for i, p in enumerate(outputs):
                expected = to_text(load_value(p, type=graph.output[i].type))
                if random_values is not None:
                    msg = _check_random(expected, got[i], random_values)
                else:
                    msg = compare(expected, got[i], case.rtol, case.atol, f"output {i} {graph.output[i].name!r}")
                if msg:
                    return Outcome(case.name, "fail", msg, time.perf_counter() - t0)
        return Outcome(case.name, "pass", "", time.perf_counter() - t0)
    except UnsupportedOperatorError as exc:
        ops = ", ".join(f"{display_domain(d)}::{op}-{v}" for d, op, v, _ in exc.operators)
        return Outcome(case.name, "unsupported", ops, time.perf_counter() - t0)
    except OnnxkitError as exc:
        return Outcome(case.name, "error", f"{type(exc).__name__}: {exc}"[:2000], time.perf_counter() - t0)
    except Exception as exc:  # noqa: BLE001
        # Broad: a bug in onnxkit must not stop the suite; the case's outcome says "internal" and
        # the traceback is logged on onnxkit.run (the outcome keeps only the message)
        get_logger("run").warning("conformance case %s: internal %s: %s", case.name, type(exc).__name__, exc,
                                  exc_info=exc)
        return Outcome(case.name, "error", f"internal {type(exc).__name__}: {exc}"[:2000], time.perf_counter() - t0)


def _check_random(expected, actual, allowed) -> Optional[str]:
    if not isinstance(actual, np.ndarray) or actual.shape != expected.shape or actual.dtype != expected.dtype:
        return f"random output: expected shape {expected.shape} dtype {expected.dtype}, got {getattr(actual, 'shape', None)} " \
               f"{getattr(actual, 'dtype', type(actual).__name__)}"
    bad = set(np.unique(actual).tolist()) - allowed
    return f"random output holds values outside {sorted(allowed)}: {sorted(bad)[:5]}" if bad else None


def run_all(cases: Iterable[Case], backend: str = "cpu", progress: bool = True, registry=None) -> list[Outcome]:
    cases = list(cases)
    outcomes = []
    if progress:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn("conformance"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      TextColumn("{task.description}"), transient=False) as bar:
            task = bar.add_task("", total=len(cases))
            for case in cases:
                outcomes.append(run_case(case, backend, registry))
                bar.update(task, advance=1, description=case.name[-40:])
    else:
        outcomes = [run_case(c, backend, registry) for c in cases]
    return outcomes


def summary(outcomes: list[Outcome]) -> dict:
    counts = {"pass": 0, "fail": 0, "unsupported": 0, "error": 0}
    for o in outcomes:
        counts[o.status] += 1
    return counts


def write_report(path, outcomes: list[Outcome], backend: str) -> None:
    data = {"backend": backend, "summary": summary(outcomes),
            "cases": [records.asdict(o) for o in outcomes]}
    Path(path).write_text(json.dumps(data, indent=1))
