"""``InferenceSession``: evaluate a model (Clause 8) with onnxruntime's shape of API.

    sess = onnxkit.InferenceSession("model.onnx")            # backend="cpu"
    outputs = sess.run(None, {"X": x})                        # list, in graph output order
    [(i.name, i.type, i.shape) for i in sess.get_inputs()]

Creating a session loads the model, validates it (15.5), binds every node and raises
:class:`UnsupportedOperatorError` listing *every* operator it cannot evaluate (4.4, 16.1) —
never halfway through a run.  ``run`` checks the feed against the declared inputs (element
type, rank, static extents, and each dimension variable bound to one extent across all
inputs, 6.5.2); an initializer that is also an input is a default that may be overridden,
one that is not is a constant that may not be fed (7.2).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import attrs
import numpy as np

from .. import ir
from ..dtypes import ELEMENT_TYPES, from_numpy_dtype, tag_name
from ..errors import LimitExceeded, OnnxkitError, ValidationError
from ..limits import DEFAULT_LIMITS, Limits
from ..registry import get_registry
from .plan import Planner


class InputError(OnnxkitError, ValueError):
    """A fed value does not match the model's declared input (or is not an input at all)."""


@attrs.frozen
class NodeArg:
    """A graph input or output as onnxruntime describes it: name, type string, shape."""

    name: str
    type: str
    shape: Optional[list]
    ir_type: Any = attrs.field(default=None, repr=False, eq=False)


def _type_str(t) -> str:
    if isinstance(t, ir.TensorType):
        return f"tensor({tag_name(t.elem_type).lower()})"
    return str(t) if t is not None else "unknown"


def _arg(vi: ir.ValueInfo) -> NodeArg:
    t = vi.type
    shape = None
    if isinstance(t, (ir.TensorType, ir.SparseTensorType)) and t.shape is not None:
        shape = list(t.shape.values)
    return NodeArg(vi.name, _type_str(t), shape, t)


class InferenceSession:
    """Evaluates one model on one backend.  Planned once; ``run`` may be called many times.

    ``own_data`` (default True): the session keeps copies of what it reads from the model
    file and from external data files, so rewriting or truncating them under a live session
    cannot change results or fault (SIGBUS).  ``own_data=False`` keeps zero-copy views of the
    mapped files instead (less memory; the files must then not change while the session lives).
    ``allow_outside``: passed to :func:`onnxkit.load` (Clause 15.3) when ``model`` is a path.
    """

    def __init__(self, model, backend: str = "cpu", *, registry=None, seed: Optional[int] = None,
                 limits: Limits = DEFAULT_LIMITS, validate: bool = True, external_data: str = "lazy",
                 allow_outside: bool = False, own_data: bool = True):
        from ..api import load

        if not isinstance(model, ir.Model):
            # own_data: the file is read, not mapped, so rewriting or truncating it cannot reach the session
            model = load(model, external_data=external_data, limits=limits, allow_outside=allow_outside,
                         copy=own_data)
        self.model = model
        self.registry = registry or get_registry()
        if backend not in self.registry.backends:
            raise OnnxkitError(f"no backend {backend!r}; installed: {sorted(self.registry.backends)}")
        self.backend = self.registry.backends[backend]
        self.limits = limits
        if model.graph is None:
            raise ValidationError([], "the model has no graph (Clause 5.3.1)")
        if validate:
            self._validate()
        self.plan = Planner(model, self.registry, backend, seed=seed, limits=limits, own_data=own_data).compile_model()
        g = model.graph
        init_names = {t.name for t in g.initializer} | {s.values.name for s in g.sparse_initializer if s.values}
        self._inputs = [vi for vi in g.input]
        self._feedable = {vi.name: vi for vi in g.input}
        self._required = [vi.name for vi in g.input if vi.name not in init_names]
        self._constants = init_names - set(self._feedable)
        self._outputs = [vi.name for vi in g.output]

    def _validate(self) -> None:
        try:
            from ..checker import check_model
        except ImportError:  # pragma: no cover - the checker is part of the host
            return
        report = check_model(self.model, registry=self.registry, limits=self.limits)
        over = [d for d in report.errors if d.code == "limit-exceeded"]
        if over:  # a documented limit refuses the model: the error says which (15.4)
            raise LimitExceeded(f"the model is refused: {over[0]}", limit=_limit_named(over[0].message),
                                path=str(over[0].location))
        if report.errors:
            raise ValidationError(report.errors, "the model does not conform, it is not evaluated (Clause 15.5)")

    # -- onnxruntime-style description -----------------------------------------------------
    def get_inputs(self) -> list:
        """The inputs a caller supplies (initializer-backed inputs are optional overrides)."""
        return [_arg(vi) for vi in self._inputs]

    def get_outputs(self) -> list:
        return [_arg(vi) for vi in self.model.graph.output]

    def get_modelmeta(self) -> dict:
        m = self.model
        return {"producer_name": m.producer_name, "graph_name": m.graph.name, "domain": m.domain,
                "version": m.model_version, "custom_metadata_map": {p.key: p.value for p in m.metadata_props}}

    # -- running ------------------------------------------------------------------------------
    def run(self, output_names: Optional[Sequence[str]], input_feed: Mapping[str, Any], run_options=None) -> list:
        """Evaluate; returns the requested outputs (all when ``output_names`` is None) in order."""
        for name in input_feed:
            if name in self._constants:
                raise InputError(f"{name!r} is a constant of the model (an initializer that is not an input) "
                                 "and cannot be fed (Clause 7.2)")
            if name not in self._feedable:
                raise InputError(f"{name!r} is not an input of the model; inputs: {[vi.name for vi in self._inputs]}")
        missing = [n for n in self._required if n not in input_feed]
        if missing:
            raise InputError(f"missing input(s) {missing} (Clause 8.1)")
        bindings: dict = {}
        to_backend = self.backend.asarray or (lambda a: a)
        values = []
        for vi in self._inputs:
            if vi.name in input_feed:
                v = _check_value(vi.name, input_feed[vi.name], vi.type, bindings, self.limits)
                values.append(_to_backend(v, to_backend))
            else:
                values.append(None)
        outs = self.plan.run(values)
        wanted = self._outputs if output_names is None else list(output_names)
        by_name = dict(zip(self._outputs, outs))
        to_numpy = self.backend.to_numpy
        result = []
        for n in wanted:
            if n not in by_name:
                raise InputError(f"{n!r} is not an output of the model; outputs: {self._outputs}")
            result.append(_to_host(by_name[n], to_numpy))
        return result


def _limit_named(message: str) -> str:
    """The name of the :class:`Limits` field a ``limit-exceeded`` diagnostic names, or ''."""
    return next((f.name for f in attrs.fields(Limits) if f.name in message), "")


def _to_backend(v, conv):
    if isinstance(v, np.ndarray):
        return conv(v)
    if isinstance(v, list):
        return [_to_backend(x, conv) for x in v]
    if isinstance(v, dict):
        return {k: _to_backend(x, conv) for k, x in v.items()}
    return v


def _to_host(v, conv):
    if v is None or isinstance(v, np.ndarray) or conv is None:
        return v
    if isinstance(v, list):
        return [_to_host(x, conv) for x in v]
    if isinstance(v, dict):
        return {k: _to_host(x, conv) for k, x in v.items()}
    try:
        return conv(v)
    except Exception:
        return v


def _as_array(name, value) -> np.ndarray:
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, (np.generic, int, float, bool, complex, str, bytes)):
        return np.asarray(value)
    raise InputError(f"input {name!r}: expected a numpy array, got {type(value).__name__}")


def _check_value(name, value, t, bindings: dict, limits: Limits):
    """Check one fed value against its declared type (6.5.2: variables bound consistently)."""
    if t is None or isinstance(t, (ir.UndefinedType, ir.OpaqueType)):
        return value
    if isinstance(t, ir.OptionalType):
        return None if value is None else _check_value(name, value, t.elem_type, bindings, limits)
    if isinstance(t, ir.SequenceType):
        if not isinstance(value, (list, tuple)):
            raise InputError(f"input {name!r}: expected a sequence (list), got {type(value).__name__}")
        return [_check_value(f"{name}[{i}]", v, t.elem_type, bindings, limits) for i, v in enumerate(value)]
    if isinstance(t, ir.MapType):
        if not isinstance(value, dict):
            raise InputError(f"input {name!r}: expected a map (dict), got {type(value).__name__}")
        return {k: _check_value(f"{name}[{k!r}]", v, t.value_type, bindings, limits) for k, v in value.items()}
    if isinstance(t, ir.SparseTensorType):
        return value
    arr = _as_array(name, value)
    want = ELEMENT_TYPES.get(t.elem_type)
    if want is not None:
        if want.tag == 8:
            if arr.dtype.kind not in "OUS":
                raise InputError(f"input {name!r}: declared tensor(string), got dtype {arr.dtype}")
            if arr.dtype.kind != "O":
                arr = arr.astype(object)
        else:
            try:
                got = from_numpy_dtype(arr.dtype)
            except OnnxkitError:
                got = None
            if got is None or got.tag != want.tag:
                raise InputError(f"input {name!r}: declared tensor({want.name.lower()}), got numpy dtype {arr.dtype}")
    if t.shape is not None:
        dims = t.shape.values
        if len(dims) != arr.ndim:
            raise InputError(f"input {name!r}: declared rank {len(dims)} {list(dims)}, got shape {list(arr.shape)}")
        for axis, (d, n) in enumerate(zip(dims, arr.shape)):
            if isinstance(d, int) and d != n:
                raise InputError(f"input {name!r}: axis {axis} must be {d}, got shape {list(arr.shape)}")
            if isinstance(d, str):
                bound = bindings.setdefault(d, (n, name))
                if bound[0] != n:
                    raise InputError(f"input {name!r}: dimension variable {d!r} is {n} here but {bound[0]} in input "
                                     f"{bound[1]!r} (Clause 6.5.2)")
    return arr


def run_model(model, inputs: Mapping[str, Any], backend: str = "cpu", **kwargs) -> dict:
    """One-shot: evaluate ``model`` on ``inputs``; returns ``{output name: value}``."""
    sess = InferenceSession(model, backend, **kwargs)
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, inputs)))
