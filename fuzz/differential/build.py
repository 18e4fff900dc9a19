"""Building one fuzz model, and the feeds it is run with.

:class:`Builder` makes an ``onnx.ModelProto`` node by node (fresh names, constants as
initializers or ``Constant`` nodes, graph inputs with symbolic dimensions).  What the fuzzer
needs to run a model again later — how to fill each input, the values each symbolic dimension
takes in the two shape variants, the IR < 4 initializers to override, the outputs whose values
are random — travels in the model's ``metadata_props`` (keys ``fuzz.*``, JSON), so a saved
(minimized) model is a reproducer on its own: :func:`feeds_for` rebuilds its feeds from it.
"""

from __future__ import annotations

import json
from typing import Optional

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

#: numpy dtype of the element types the fuzzer uses
NP = {TP.FLOAT: np.float32, TP.DOUBLE: np.float64, TP.FLOAT16: np.float16, TP.INT32: np.int32,
      TP.INT64: np.int64, TP.BOOL: np.bool_, TP.UINT8: np.uint8, TP.INT8: np.int8}
TAG = {np.dtype(v): k for k, v in NP.items()}
FLOATS = (TP.FLOAT, TP.DOUBLE, TP.FLOAT16)


class Builder:
    """A model under construction.  ``rng``: the case's generator (``numpy.random.Generator``)."""

    def __init__(self, rng: np.random.Generator, opset: int = 17, ir_version: Optional[int] = None):
        self.rng = rng
        self.opset = opset
        self.ir_version = ir_version if ir_version is not None else (8 if opset >= 15 else 7 if opset >= 12 else 6)
        self.nodes, self.inits, self.inputs, self.outputs, self.value_info = [], [], [], [], []
        self.specs: dict = {}       # input name -> value spec
        self.dims: dict = {}        # dim_param -> [variant 0 extent, variant 1 extent]
        self.overrides: dict = {}   # IR < 4: initializer name -> value spec of its fed override
        self.random: list = []      # outputs whose values are random (checked by property)
        self.tags: list = []        # what the case plants (for the summary)
        self._n = 0

    def name(self, base: str = "v") -> str:
        self._n += 1
        return f"{base}{self._n}"

    # -- values -----------------------------------------------------------------------------
    def dim(self, extents) -> str:
        """A symbolic dimension whose extent is ``extents[0]`` in the first run, ``extents[1]`` in the second."""
        p = self.name("d")
        self.dims[p] = [int(extents[0]), int(extents[1])]
        return p

    def input(self, elem: int, shape, spec: Optional[dict] = None, base: str = "x") -> str:
        """A graph input (``shape`` entries: ints or dim_param names; None: no shape)."""
        n = self.name(base)
        self.inputs.append(helper.make_tensor_value_info(n, elem, shape))
        self.specs[n] = spec or default_spec(elem)
        return n

    def const(self, value, how: Optional[str] = None, base: str = "c") -> str:
        """A constant: an initializer (``how='init'``), a ``Constant`` node (``'node'``) or either."""
        value = np.asarray(value)
        how = how or ("init" if self.rng.random() < 0.7 else "node")
        if self.opset < 9 and value.dtype.kind != "f":
            how = "init"           # Constant-1 holds floating-point tensors only
        n = self.name(base)
        t = numpy_helper.from_array(value, n)
        if how == "init":
            self.inits.append(t)
        else:
            self.nodes.append(helper.make_node("Constant", [], [n], value=t))
        return n

    def node(self, op: str, inputs, n_out: int = 1, domain: str = "", **attrs):
        outs = [self.name(op.lower()[:4]) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, list(inputs), outs, domain=domain or None, **attrs))
        return outs[0] if n_out == 1 else outs

    def output(self, name: str) -> str:
        if name not in self.outputs:
            self.outputs.append(name)
        return name

    def stale(self, name: str, elem: int, shape) -> None:
        """A value_info declaration for ``name`` (possibly wrong: the optimizer must not trust it)."""
        self.value_info.append(helper.make_tensor_value_info(name, elem, shape))

    # -- result -----------------------------------------------------------------------------
    def model(self) -> onnx.ModelProto:
        if self.ir_version < 4:     # IR < 4: every initializer is a graph input too
            listed = {vi.name for vi in self.inputs}
            self.inputs += [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                            for t in self.inits if t.name not in listed]
        g = helper.make_graph(self.nodes, "fuzz", self.inputs, [], initializer=self.inits,
                              value_info=self.value_info)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", self.opset)], ir_version=self.ir_version)
        m.graph.output.extend(output_infos(m, self.outputs, self.rng.random() < 0.5))
        meta = {"fuzz.inputs": self.specs, "fuzz.dims": self.dims, "fuzz.overrides": self.overrides,
                "fuzz.random": self.random, "fuzz.tags": self.tags}
        for k, v in meta.items():
            if v:
                m.metadata_props.add(key=k, value=json.dumps(v, sort_keys=True))
        return m


def default_spec(elem: int) -> dict:
    if elem in FLOATS:
        return {"kind": "f", "lo": -3.0, "hi": 3.0}
    if elem == TP.BOOL:
        return {"kind": "b"}
    return {"kind": "i", "lo": -5, "hi": 5}


def output_infos(m: onnx.ModelProto, names, with_shape: bool) -> list:
    """ValueInfos for the graph outputs ``names``: the element type onnx's inference gives (and its
    shape where ``with_shape`` and the shape is known)."""
    probe = onnx.ModelProto()
    probe.CopyFrom(m)
    del probe.graph.value_info[:]
    probe.graph.output.extend(helper.make_tensor_value_info(n, TP.UNDEFINED, None) for n in names)
    typed = {}
    try:
        inferred = onnx.shape_inference.infer_shapes(probe, strict_mode=False)
        for vi in list(inferred.graph.input) + list(inferred.graph.output) + list(inferred.graph.value_info):
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
                typed[vi.name] = vi
    except Exception:
        pass
    init_types = {t.name: t.data_type for t in m.graph.initializer}
    init_types.update((vi.name, vi.type.tensor_type.elem_type) for vi in m.graph.input)
    producer = {o: node for node in m.graph.node for o in node.output}

    def elem_of(n: str, depth: int = 0) -> int:
        vi = typed.get(n)
        if vi is not None:
            return vi.type.tensor_type.elem_type
        if n in init_types:
            return init_types[n]
        node = producer.get(n)
        if node is None or depth > 20 or not node.input:
            return TP.FLOAT
        return elem_of(node.input[0], depth + 1)   # the kernels here keep their first input's type
    out = []
    for n in names:
        vi = typed.get(n)
        elem = elem_of(n)
        shape = None
        if with_shape and vi is not None and vi.type.tensor_type.HasField("shape"):
            dims = vi.type.tensor_type.shape.dim
            if all(d.HasField("dim_value") or d.HasField("dim_param") for d in dims):
                shape = [d.dim_value if d.HasField("dim_value") else d.dim_param for d in dims]
        out.append(helper.make_tensor_value_info(n, elem, shape))
    return out


def meta(model: onnx.ModelProto) -> dict:
    """The ``fuzz.*`` metadata of ``model`` (empty entries where absent)."""
    got = {"inputs": {}, "dims": {}, "overrides": {}, "random": [], "tags": []}
    for p in model.metadata_props:
        if p.key.startswith("fuzz."):
            got[p.key[5:]] = json.loads(p.value)
    return got


def set_meta(model: onnx.ModelProto, key: str, value) -> None:
    for p in list(model.metadata_props):
        if p.key == "fuzz." + key:
            model.metadata_props.remove(p)
    if value:
        model.metadata_props.add(key="fuzz." + key, value=json.dumps(value, sort_keys=True))


# -- feeds ------------------------------------------------------------------------------------
def fill(rng: np.random.Generator, spec: dict, shape: tuple, dtype) -> np.ndarray:
    """Values of ``spec`` (kind f/i/b, bounds, ``special``: NaN/inf/-0 sprinkled in)."""
    return np.array(_fill(rng, spec, tuple(shape), dtype), dtype=dtype).reshape(shape)


def _fill(rng: np.random.Generator, spec: dict, shape: tuple, dtype):
    kind = spec.get("kind", "f")
    if kind == "b" or np.dtype(dtype) == np.bool_:
        return np.ones(shape, bool) if spec.get("always") else rng.random(shape) < 0.5
    if kind == "i" or np.dtype(dtype).kind in "iu":
        lo, hi = int(spec.get("lo", -5)), int(spec.get("hi", 5))
        v = rng.integers(lo, hi + 1, size=shape)
        if spec.get("nonzero"):
            v = np.where(v == 0, 1, v)
        return v.astype(dtype)
    if "choices" in spec:
        return rng.choice(np.array(spec["choices"], dtype=np.float64), size=shape).astype(dtype)
    lo, hi = float(spec.get("lo", -3.0)), float(spec.get("hi", 3.0))
    v = rng.uniform(lo, hi, size=shape)
    if spec.get("positive"):
        v = np.abs(v) + 0.1
    if spec.get("special") and v.size:
        pick = rng.random(shape) < 0.15
        values = {"nan": [np.nan, 0.0, -0.0], "inf": [np.inf, -np.inf, 0.0, -0.0]}.get(
            spec["special"], [np.nan, np.inf, -np.inf, 0.0, -0.0])
        v = np.where(pick, rng.choice(np.array(values), size=shape), v)
    return v.astype(dtype)


def shape_of(vi, dims: dict, variant: int) -> Optional[tuple]:
    t = vi.type.tensor_type
    if not t.HasField("shape"):
        return None
    out = []
    for d in t.shape.dim:
        if d.HasField("dim_value"):
            out.append(d.dim_value)
        elif d.dim_param in dims:
            out.append(dims[d.dim_param][variant])
        else:
            out.append(2)
    return tuple(out)


class Feed:
    """One fed array as the caller holds it: ``value`` (possibly a view: transposed, strided,
    broadcast, read-only) and the ``base`` it views, so a later run can change the base in place."""

    def __init__(self, rng, spec, shape, dtype):
        self.rng, self.spec, self.shape, self.dtype = rng, spec, tuple(shape), np.dtype(dtype)
        style = rng.choice(["plain", "plain", "plain", "transposed", "strided", "broadcast"]) if shape else "plain"
        if style == "broadcast" and shape[0] < 2:
            style = "strided"
        self.style = str(style)
        if self.style == "transposed":
            self.base = fill(rng, spec, self.shape[::-1], dtype)
            self.value = self.base.T
        elif self.style == "strided":
            big = (self.shape[0] * 2,) + self.shape[1:]
            self.base = fill(rng, spec, big, dtype)
            self.value = self.base[::2]
        elif self.style == "broadcast":
            small = (1,) + self.shape[1:]
            self.base = fill(rng, spec, small, dtype)
            self.value = np.broadcast_to(self.base, self.shape)  # read-only view
        else:
            self.base = fill(rng, spec, self.shape, dtype)
            self.value = self.base

    def refill(self) -> None:
        """New values written into the base in place (``value`` is the same object, new contents)."""
        self.base[...] = fill(self.rng, self.spec, self.base.shape, self.dtype)


def feeds_for(model: onnx.ModelProto, rng: np.random.Generator, variant: int, overrides: bool = False) -> dict:
    """``{input name: Feed}`` for the required inputs of ``model`` in shape ``variant`` (0 or 1);
    with ``overrides``, also the IR < 4 initializer inputs the metadata names."""
    info = meta(model)
    inits = {t.name for t in model.graph.initializer}
    init_shapes = {t.name: tuple(t.dims) for t in model.graph.initializer}
    out = {}
    for vi in model.graph.input:
        if vi.name in inits:
            if overrides and vi.name in info["overrides"]:
                dtype = NP[vi.type.tensor_type.elem_type]
                out[vi.name] = Feed(rng, info["overrides"][vi.name], init_shapes[vi.name], dtype)
            continue
        shape = shape_of(vi, info["dims"], variant)
        if shape is None:
            shape = ()
        spec = info["inputs"].get(vi.name) or default_spec(vi.type.tensor_type.elem_type)
        out[vi.name] = Feed(rng, spec, shape, NP[vi.type.tensor_type.elem_type])
    return out
