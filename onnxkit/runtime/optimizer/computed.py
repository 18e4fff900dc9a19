"""Small constants a graph computes: the values a rule needs that exporters build with nodes.

torch's exporter writes a Pad's pads as a chain of shape arithmetic on constants (``Concat``
of a ``Constant`` and a ``ConstantOfShape``, then ``Reshape``, ``Slice``, ``Transpose``,
``Reshape``, ``Cast``); planning folds such chains (:meth:`onnxkit.runtime.plan.Planner._fold_constants`)
but a graph rewrite runs before planning and sees a node's output, not a constant.
:func:`computed_constant` evaluates such a value on demand, the way planning would fold it:

* only the shape-arithmetic operators of :data:`OPS` (ai.onnx, no subgraphs; deterministic,
  none of them enlarges a value beyond its inputs but ``ConstantOfShape``, whose shape is
  checked first), at most :data:`MAX_NODES` nodes per value, every input and result at most
  :data:`MAX_ELEMENTS` elements;
* from constants alone (:meth:`~.view.GraphView.constant`: initializers and Constant nodes);
* each node by the cpu backend's own kernel (the planner's binding: one definition of each
  operator, :mod:`onnxkit.runtime.plan`; the view's registry, else the process's); a node that
  fails, or a registry without a ``cpu`` backend, gives None — the rewrite is then not made.

The initializers a value was computed from are returned with it so that a pass that decides
on it notes them (:meth:`~.view.GraphView.read_constant`: an IR < 4 override of one runs the
model as given).  Results are cached per view and name (a rewrite never changes a value).
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

from .view import GraphView, is_default

#: the operators evaluated (shape arithmetic)
OPS = frozenset({"Cast", "Concat", "ConstantOfShape", "Flatten", "Gather", "Identity", "Reshape", "Slice", "Squeeze",
                 "Transpose", "Unsqueeze", "Neg", "Add", "Sub", "Mul"})
#: the most nodes evaluated for one value
MAX_NODES = 64
#: the most elements of any value read or made
MAX_ELEMENTS = 4096


def computed_constant(view: GraphView, name: str) -> Optional[tuple]:
    """``(value, initializers read)`` of ``name`` where it is a constant or computed from
    constants by :data:`OPS` within the bounds (module docstring), else None."""
    cache = view.computed
    if name not in cache:
        cache[name] = _value(view, name, [MAX_NODES], cache)
    return cache[name]


def _value(view: GraphView, name: str, budget: list, cache: dict) -> Optional[tuple]:
    if name in cache:
        return cache[name]
    direct = view.constant(name)
    if direct is not None:
        found = (direct, {name} if name in view.inits else set()) if direct.size <= MAX_ELEMENTS else None
        cache[name] = found
        return found
    node = view.producer_of(name)
    budget[0] -= 1
    if node is None or budget[0] < 0 or not is_default(node) or node.op_type not in OPS or len(node.output) != 1:
        return None
    args, leaves = [], set()
    for i in node.input:
        if not i:
            args.append(None)
            continue
        got = _value(view, i, budget, cache)
        if got is None:
            return None
        args.append(got[0])
        leaves |= got[1]
    if node.op_type == "ConstantOfShape" and (args[0] is None or math.prod(int(d) for d in args[0].reshape(-1))
                                              > MAX_ELEMENTS or np.any(args[0] < 0)):
        return None
    out = _evaluate(view, node, args)
    if out is None or out.size > MAX_ELEMENTS:
        return None
    out.flags.writeable = False
    cache[name] = (out, leaves)
    return cache[name]


def _evaluate(view: GraphView, node, args: list) -> Optional[np.ndarray]:
    """``node``'s output on ``args`` by the cpu backend's kernel, or None where that fails."""
    planner = view.folder
    if planner is None:
        from ...registry import get_registry
        from ..plan import Planner

        registry = view.registry if view.registry is not None else get_registry()
        if "cpu" not in registry.backends:
            return None
        try:
            planner = view.folder = Planner(view.model, registry, "cpu")
        except Exception:  # noqa: BLE001 - no cpu planning here: no computed constants
            return None
    try:
        step, _ = planner.compile_node(node, planner.opsets)
        if step is None:
            return None
        out = step.fn(*args)
    except Exception:  # noqa: BLE001 - a node that fails now is left to fail at run time, by name
        return None
    if type(out) is tuple:
        return None
    return np.array(out, copy=True)
