"""Small constants a graph computes: the values a rule needs that exporters build with nodes.

torch's exporter writes a Pad's pads as a chain of shape arithmetic on constants (``Concat``
of a ``Constant`` and a ``ConstantOfShape``, then ``Reshape``, ``Slice``, ``Transpose``,
``Reshape``, ``Cast``); planning folds such chains (:meth:`onnxkit.runtime.plan.Planner._fold_constants`)
but a graph rewrite runs before planning and sees a node's output, not a constant.
:func:`computed_constant` evaluates such a value on demand, the way planning would fold it:

* every deterministic node of the default domain without subgraphs and with one output (the
  nodes planning folds: an operator its domain package declares ``nondeterministic`` is not
  evaluated, :func:`~onnxkit.runtime.plan.is_deterministic`), at most :data:`MAX_NODES` nodes
  per value, every input and result at most :data:`MAX_ELEMENTS` elements (few enough that
  inference reads each input's values); a node whose operator declares a size guard
  (:mod:`onnxkit.runtime.budget`: ConstantOfShape, Expand, Tile, Range...) is first checked by
  it against :data:`LIMITS`, so an output too large is refused before it is made;
* from constants alone (:meth:`~.view.GraphView.constant`: initializers and Constant nodes);
* each node by the kernel of a backend whose values are numpy arrays on the host (the first,
  by name, that declares ``host_arrays``: ``cpu``), as the planner binds it (one definition of
  each operator, :mod:`onnxkit.runtime.plan`; the view's registry, else the process's); a node
  that fails, or a registry without such a backend, gives None — the rewrite is then not made.
  A node fails by a typed refusal (:data:`~onnxkit.runtime.kernel.REFUSALS`: its planning, its
  size guard or its kernel refusing the constants); any other fault is a bug, logged on
  ``onnxkit.plan`` at WARNING with the node and the traceback (and the rewrite not made either).

The initializers a value was computed from are returned with it so that a pass that decides
on it notes them (:meth:`~.view.GraphView.read_constant`: an IR < 4 override of one runs the
model as given).  Results are cached per view and name (a rewrite never changes a value).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ...errors import OnnxkitError
from ...functions import subgraphs_of
from ...inference.context import MAX_CONSTANT_ELEMENTS
from ...limits import Limits
from ...log import get_logger
from ..budget import RunBudget
from ..plan import evaluate_constant, is_deterministic
from .view import GraphView, is_default

#: the most nodes evaluated for one value
MAX_NODES = 64
#: the most elements of any value read or made (inference reads the values of inputs this small)
MAX_ELEMENTS = MAX_CONSTANT_ELEMENTS
#: what a node's size guard admits: one value of at most MAX_ELEMENTS elements of 16 octets
LIMITS = Limits(max_value_bytes=MAX_ELEMENTS * 16, max_run_bytes=MAX_ELEMENTS * 16)


def computed_constant(view: GraphView, name: str) -> Optional[tuple]:
    """``(value, initializers read)`` of ``name`` where it is a constant or computed from
    constants by the nodes and within the bounds of the module docstring, else None."""
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
    if node is None or budget[0] < 0 or not is_default(node) or len(node.output) != 1 \
            or subgraphs_of(node):
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
    out = _computed(view, node, args)
    if out is None or out.size > MAX_ELEMENTS:
        return None
    out.flags.writeable = False
    cache[name] = (out, leaves)
    return cache[name]


def _computed(view: GraphView, node, args: list) -> Optional[np.ndarray]:
    """``node``'s output on the constants ``args``, or None where it is not computed here (see
    the module docstring)."""
    try:
        step = _step(view, node)
        if step is None or step.scope or not is_deterministic(step):
            return None
        return _evaluate(view, node, args)
    except Exception as exc:  # noqa: BLE001
        # Broad: planning the node, its guard and its kernel are called here ahead of the run,
        # for a rewrite that is only an optimization: their typed refusals are "not computed"
        # (_step, _evaluate); anything else is a bug, which must neither stop the session nor pass
        # in silence: logged with the node and the traceback, and the rewrite is not made.
        get_logger("plan").warning("optimizer: computing the constant output of node %r (%s) raised %s: %s; the "
                                   "rewrites that need it are not made", node.name, node.op_type,
                                   type(exc).__name__, exc, exc_info=exc)
        return None


class _Folder:
    """What a view evaluates nodes with: a planner on a host-array backend, its steps by node."""

    __slots__ = ("planner", "steps")

    def __init__(self, planner):
        self.planner, self.steps = planner, {}


def _host_backend(registry) -> Optional[str]:
    """The first backend, by name, whose values are numpy arrays on the host (``host_arrays``)."""
    return next((name for name in sorted(registry.backends) if getattr(registry.backends[name], "host_arrays", False)),
                None)


def _step(view: GraphView, node):
    """``node`` planned on the view's host-array backend (made once per node), or None."""
    folder = view.folder
    if folder is None:
        from ...registry import get_registry
        from ..plan import Planner

        registry = view.registry if view.registry is not None else get_registry()
        backend = _host_backend(registry)
        view.folder = _Folder(None)  # until made: a planner that cannot be made is not tried again
        try:
            folder = _Folder(None if backend is None else Planner(view.model, registry, backend))
        except OnnxkitError:  # no planning here: no computed constants
            folder = _Folder(None)
        view.folder = folder
    if folder.planner is None:
        return None
    found = folder.steps.get(id(node))
    if found is None or found[0] is not node:
        folder.steps[id(node)] = (node, None)  # until planned: a node whose planning fails is not tried again
        try:
            step, _ = folder.planner.compile_node(node, folder.planner.opsets)
        except OnnxkitError:  # a node that cannot be planned here (by name) is not evaluated
            step = None
        found = folder.steps[id(node)] = (node, step)
    return found[1]


def _evaluate(view: GraphView, node, args: list) -> Optional[np.ndarray]:
    """``node``'s output on ``args`` by its host-array kernel, its size guard admitting it within
    :data:`LIMITS` first (:func:`~onnxkit.runtime.graph_plan.evaluate_constant`), or None where
    either refuses them or the node has more than one output."""
    step = _step(view, node)
    if step is None:
        return None
    outs = evaluate_constant(step, args, RunBudget(LIMITS), "optimizer: computed constant")
    if outs is None or len(outs) != 1:
        return None
    return np.array(outs[0], copy=True)
