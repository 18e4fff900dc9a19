"""Reverse-mode differentiation: the ``Gradient`` operator of ai.onnx.preview.training (host_only).

Gradient computes the gradients of the value named by ``y`` with respect to the values named by
``xs``, through the nodes of the *enclosing* graph that compute ``y`` from ``xs`` and ``zs``.
The node's inputs are the values of ``xs`` followed by those of ``zs``; output ``i`` is
dy/dxs[i] (``y`` seeded with ones, i.e. the gradient of the sum of ``y``), with the shape and
element type of ``xs[i]``; an ``xs`` value ``y`` does not depend on gets zeros.

When the session is planned, the kernel walks back from ``y`` to ``xs``/``zs`` and the
graph's constants (initializers that are not graph inputs, and constant-producing nodes),
and compiles those nodes as a nested plan (``ctx.compile``) with the same operator set imports
(so each runs the backend's own kernel for its bound definition).  Every node on a path from
``xs`` to ``y`` needs an exact gradient rule for its bound definition; a node without one,
``y`` depending on a value that is neither in ``xs``/``zs`` nor constant, or a node with
subgraphs on the way, are reported at planning time as an EvaluationError naming the
operator.  Nothing is ever approximated (no numerical differentiation, Clause 4.4).  The rules
are written with numpy, so the operator is host_only: the gpu backend runs it on its cpu
fallback (the forward nodes then run there too).

Gradient rules exist for the elementwise arithmetic (Add, Sub, Mul, Div with legacy
``broadcast``/``axis``, Pow in base and exponent), Neg, Abs, Reciprocal, Sigmoid, Tanh, Exp,
Log, Sqrt, Relu, LeakyRelu, Identity, MatMul, Gemm, Sum, Mean, ReduceSum, ReduceMean, Reshape,
Flatten, Squeeze, Unsqueeze, Expand, Transpose, Concat, Softmax and LogSoftmax (2-D coercion
before 13, one axis from 13); ``_RULES`` holds the definitions each rule is exact for.

Where a function is not differentiable at a point, the usual one-sided convention is used:
Relu and LeakyRelu take the slope of the negative side at 0, Abs has derivative 0 at 0,
d(x**e)/de is 0 where x == 0 and e >= 0, and d(x**e)/dx is 0 where e == 0.

Gradients are accumulated in float32 (float64 when any ``xs`` value is float64) and rounded
to each ``xs`` element type; ``xs`` must be float16, bfloat16, float32 or float64.
"""

from __future__ import annotations

import sys

import numpy as np

from onnxkit.plugin import (KernelTable, calls_blas, ir, is_default_domain, node_attributes, normalize_domain,
                            subgraphs_of)

KERNELS = KernelTable()
DOMAIN = "ai.onnx.preview.training"
_FLOATS = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))


def _is_float(dtype) -> bool:
    """float16, float32, float64 or bfloat16: ml_dtypes', which is not imported to ask (a dtype of
    its can only exist once it is)."""
    if dtype in _FLOATS:
        return True
    ml_dtypes = sys.modules.get("ml_dtypes")
    return ml_dtypes is not None and dtype == ml_dtypes.bfloat16


# -- gradient rules ---------------------------------------------------------------------------
#: op_type -> (since_versions the rule is exact for, differentiable input positions or None
#: for all, rule).  A rule is ``rule(step, vals, g)`` -> one gradient (or None) per input,
#: ``g`` being the gradient of the node's (only) output.
_RULES: dict = {}


def _rule(op_types, versions, diff=None):
    def deco(fn):
        for op in op_types.split():
            _RULES[op] = (frozenset(versions), diff, fn)
        return fn

    return deco


def _unbroadcast(g, shape):
    """Sum ``g`` over the axes a value of ``shape`` was broadcast along (numpy rules)."""
    shape = tuple(int(d) for d in shape)
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    if lead > 0:
        g = g.sum(axis=tuple(range(lead)))
    axes = tuple(i for i, (s, d) in enumerate(zip(shape, g.shape)) if s == 1 and d != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return g.reshape(shape)


def _to_operand(step, vals, g, i):
    """``g`` (output-shaped) reduced to the shape of input ``i`` of a broadcasting operator.

    Definitions before 7 broadcast only B (input 1) when ``broadcast=1``, aligned at ``axis``
    when that is given and at the trailing dimensions otherwise.
    """
    shape = np.shape(vals.raw(step.inputs[i]))
    axis = step.attrs.get("axis")
    if step.since < 7 and i == 1 and step.attrs.get("broadcast") and axis is not None:
        axis = int(axis) + (g.ndim if int(axis) < 0 else 0)
        expanded = (1,) * axis + tuple(shape) + (1,) * (g.ndim - axis - len(shape))
        return _unbroadcast(g, expanded).reshape(shape)
    return _unbroadcast(g, shape)


_ARITH = (1, 6, 7, 13, 14)


@_rule("Add", _ARITH)
def _add(s, v, g):
    return [_to_operand(s, v, g, 0) if s.want[0] else None, _to_operand(s, v, g, 1) if s.want[1] else None]


@_rule("Sub", _ARITH)
def _sub(s, v, g):
    return [_to_operand(s, v, g, 0) if s.want[0] else None, _to_operand(s, v, -g, 1) if s.want[1] else None]


@_rule("Mul", _ARITH)
def _mul(s, v, g):
    a, b = v.inp(s, 0), v.inp(s, 1)
    if s.since < 7 and s.attrs.get("broadcast"):
        b = b.reshape(_legacy_b_shape(s, a.ndim, b.shape))
    return [_to_operand(s, v, g * b, 0) if s.want[0] else None, _to_operand(s, v, g * a, 1) if s.want[1] else None]


@_rule("Div", _ARITH)
def _div(s, v, g):
    a, b = v.inp(s, 0), v.inp(s, 1)
    if s.since < 7 and s.attrs.get("broadcast"):
        b = b.reshape(_legacy_b_shape(s, a.ndim, b.shape))
    ga = g / b
    return [_to_operand(s, v, ga, 0) if s.want[0] else None,
            _to_operand(s, v, -ga * a / b, 1) if s.want[1] else None]


def _legacy_b_shape(s, rank, bshape):
    """The shape B takes, aligned against A, under the broadcasting of definitions 1 and 6."""
    axis = s.attrs.get("axis")
    if axis is None:
        return tuple(bshape)
    axis = int(axis) + (rank if int(axis) < 0 else 0)
    return (1,) * axis + tuple(bshape) + (1,) * (rank - axis - len(bshape))


@_rule("Pow", (1, 7, 12, 13, 15))
def _pow(s, v, g):
    x, e = v.inp(s, 0), v.inp(s, 1)
    if s.since < 7 and s.attrs.get("broadcast"):
        e = e.reshape(_legacy_b_shape(s, x.ndim, e.shape))
    out = [None, None]
    with np.errstate(all="ignore"):
        if s.want[0]:
            gx = np.where(e == 0, 0, g * e * np.power(x, e - 1)).astype(g.dtype, copy=False)
            out[0] = _to_operand(s, v, gx, 0)
        if s.want[1]:
            z = v.out(s)
            ge = np.where((x == 0) & (e >= 0), 0, g * z * np.log(x)).astype(g.dtype, copy=False)
            out[1] = _to_operand(s, v, ge, 1)
    return out


_UNARY = (1, 6, 13)


@_rule("Neg", _UNARY)
def _neg(s, v, g):
    return [-g]


@_rule("Identity", (1, 13, 14, 16, 19, 21, 23, 24, 25))
def _identity(s, v, g):
    return [g]


@_rule("Abs", _UNARY)
def _abs(s, v, g):
    return [g * np.sign(v.inp(s, 0))]


@_rule("Reciprocal", _UNARY)
def _reciprocal(s, v, g):
    y = v.out(s)
    return [-g * y * y]


@_rule("Relu", (1, 6, 13, 14))
def _relu(s, v, g):
    return [np.where(v.inp(s, 0) > 0, g, 0).astype(g.dtype, copy=False)]


@_rule("LeakyRelu", (1, 6, 16))
def _leaky_relu(s, v, g):
    alpha = float(s.attrs.get("alpha", 0.01))
    return [np.where(v.inp(s, 0) > 0, g, g * alpha).astype(g.dtype, copy=False)]


@_rule("Sigmoid", _UNARY)
def _sigmoid(s, v, g):
    y = v.out(s)
    return [g * y * (1 - y)]


@_rule("Tanh", _UNARY)
def _tanh(s, v, g):
    y = v.out(s)
    return [g * (1 - y * y)]


@_rule("Exp", _UNARY)
def _exp(s, v, g):
    return [g * v.out(s)]


@_rule("Log", _UNARY)
def _log(s, v, g):
    with np.errstate(divide="ignore", invalid="ignore"):
        return [g / v.inp(s, 0)]


@_rule("Sqrt", _UNARY)
def _sqrt(s, v, g):
    with np.errstate(divide="ignore", invalid="ignore"):
        return [g * 0.5 / v.out(s)]


@_rule("MatMul", (1, 9, 13))
def _matmul(s, v, g):
    a, b = v.inp(s, 0), v.inp(s, 1)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("MatMul of a scalar")
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    if a.ndim == 1 and b.ndim == 1:
        g2 = g.reshape(1, 1)
    elif a.ndim == 1:
        g2 = np.expand_dims(g, -2)
    elif b.ndim == 1:
        g2 = np.expand_dims(g, -1)
    else:
        g2 = g
    out = [None, None]
    if s.want[0]:
        out[0] = _unbroadcast(np.matmul(g2, np.swapaxes(b2, -1, -2)), a2.shape).reshape(a.shape)
    if s.want[1]:
        out[1] = _unbroadcast(np.matmul(np.swapaxes(a2, -1, -2), g2), b2.shape).reshape(b.shape)
    return out


@_rule("Gemm", (1, 6, 7, 9, 11, 13))
def _gemm(s, v, g):
    alpha, beta = float(s.attrs.get("alpha", 1.0)), float(s.attrs.get("beta", 1.0))
    ta, tb = bool(s.attrs.get("transA", 0)), bool(s.attrs.get("transB", 0))
    a, b = v.inp(s, 0), v.inp(s, 1)
    ap = a.T if ta else a
    bp = b.T if tb else b
    out = [None, None, None]
    if s.want[0]:
        da = alpha * (g @ bp.T)
        out[0] = da.T if ta else da
    if s.want[1]:
        db = alpha * (ap.T @ g)
        out[1] = db.T if tb else db
    if len(s.want) > 2 and s.want[2]:
        out[2] = _unbroadcast(beta * g, np.shape(v.raw(s.inputs[2])))
    return out


@_rule("Sum", (1, 6, 8, 13))
def _sum(s, v, g):
    return [_unbroadcast(g, np.shape(v.raw(n))) if w else None for n, w in zip(s.inputs, s.want)]


@_rule("Mean", (1, 6, 8, 13))
def _mean(s, v, g):
    g = g / len(s.inputs)
    return [_unbroadcast(g, np.shape(v.raw(n))) if w else None for n, w in zip(s.inputs, s.want)]


def _reduced_axes(s, v, x):
    """The axes a ReduceSum/ReduceMean node reduces, or None when it is the identity."""
    input_form = (s.op == "ReduceSum" and s.since >= 13) or (s.op == "ReduceMean" and s.since >= 18)
    if input_form:
        raw = v.raw(s.inputs[1]) if len(s.inputs) > 1 and s.inputs[1] else None
        axes = None if raw is None or np.size(raw) == 0 else [int(a) for a in np.asarray(raw).reshape(-1)]
        if axes is None and int(s.attrs.get("noop_with_empty_axes", 0)):
            return None
    else:
        axes = s.attrs.get("axes")
        axes = [int(a) for a in axes] if axes else None
    if axes is None:
        return list(range(x.ndim))
    return sorted({a + x.ndim if a < 0 else a for a in axes})


@_rule("ReduceSum", (1, 11, 13))
def _reduce_sum(s, v, g):
    return [_reduce_back(s, v, g, mean=False)]


@_rule("ReduceMean", (1, 11, 13, 18))
def _reduce_mean(s, v, g):
    return [_reduce_back(s, v, g, mean=True)]


def _reduce_back(s, v, g, mean):
    x = v.raw(s.inputs[0])
    axes = _reduced_axes(s, v, x)
    if axes is None:
        return g
    if not int(s.attrs.get("keepdims", 1)):
        g = np.expand_dims(g, tuple(axes)) if axes else g
    g = np.broadcast_to(g, x.shape)
    if mean:
        count = int(np.prod([x.shape[a] for a in axes])) if axes else 1
        g = g / max(count, 1)
    return g


@_rule("Reshape", (1, 5, 13, 14, 19, 21, 23, 24, 25), diff=(0,))
def _reshape(s, v, g):
    return [g.reshape(np.shape(v.raw(s.inputs[0])))]


_rule("Flatten", (1, 9, 11, 13, 21, 23, 24, 25), diff=(0,))(_reshape)
_rule("Squeeze Unsqueeze", (1, 11, 13, 21, 23, 24, 25), diff=(0,))(_reshape)


@_rule("Expand", (8, 13), diff=(0,))
def _expand(s, v, g):
    return [_unbroadcast(g, np.shape(v.raw(s.inputs[0])))]


@_rule("Transpose", (1, 13, 21, 23, 24, 25))
def _transpose(s, v, g):
    perm = s.attrs.get("perm")
    if not perm:
        return [g.transpose()]
    return [g.transpose(np.argsort([int(p) for p in perm]))]


@_rule("Concat", (1, 4, 11, 13))
def _concat(s, v, g):
    axis = int(s.attrs.get("axis", 1))
    axis += g.ndim if axis < 0 else 0
    out, start = [], 0
    for n, w in zip(s.inputs, s.want):
        size = np.shape(v.raw(n))[axis]
        if w:
            idx = [slice(None)] * g.ndim
            idx[axis] = slice(start, start + size)
            out.append(g[tuple(idx)])
        else:
            out.append(None)
        start += size
    return out


def _along_axis(s, y, g, core):
    """Apply ``core(y, g, axis)`` with the axis semantics of (Log)Softmax's definition."""
    if s.since >= 13:
        axis = int(s.attrs.get("axis", -1))
        return core(y, g, axis + y.ndim if axis < 0 else axis)
    axis = int(s.attrs.get("axis", 1))
    axis += y.ndim if axis < 0 else 0
    rows = int(np.prod(y.shape[:axis]))
    flat = (rows, -1) if y.size else (rows, int(np.prod(y.shape[axis:])))
    return core(y.reshape(flat), g.reshape(flat), 1).reshape(y.shape)


@_rule("Softmax", (1, 11, 13))
def _softmax(s, v, g):
    def core(y, gy, axis):
        return y * (gy - np.sum(gy * y, axis=axis, keepdims=True))

    return [_along_axis(s, v.out(s), g, core)]


@_rule("LogSoftmax", (1, 11, 13))
def _log_softmax(s, v, g):
    def core(y, gy, axis):
        return gy - np.exp(y) * np.sum(gy, axis=axis, keepdims=True)

    return [_along_axis(s, v.out(s), g, core)]


# -- planning ---------------------------------------------------------------------------------
class _Step:
    """A node on a path from xs to y: its bound definition, attributes and rule."""

    __slots__ = ("node", "op", "since", "attrs", "inputs", "output", "want", "rule")

    def __init__(self, node, since, attrs, want, rule):
        self.node = node
        self.op = node.op_type
        self.since = since
        self.attrs = attrs
        self.inputs = list(node.input)
        self.output = node.output[0]
        self.want = want
        self.rule = rule


class _Values:
    """The forward values by name, converted to the compute type on first use."""

    def __init__(self, raw: dict, cdt):
        self._raw = raw
        self._cdt = cdt
        self._cache: dict = {}

    def raw(self, name):
        return self._raw[name]

    def get(self, name):
        c = self._cache.get(name)
        if c is None:
            value = self._raw[name]
            if not isinstance(value, np.ndarray) and not np.isscalar(value):
                raise ValueError(f"value {name!r} is not a tensor")
            c = self._cache[name] = np.asarray(value, dtype=self._cdt)
        return c

    def inp(self, step, i):
        return self.get(step.inputs[i])

    def out(self, step):
        return self.get(step.output)


def _strs(value) -> list:
    if value is None:
        return []
    items = value if isinstance(value, (list, tuple)) else [value]
    return [i.decode("utf-8", "surrogateescape") if isinstance(i, (bytes, bytearray)) else str(i) for i in items]


def _select(ctx, graph, xs, zs, y):
    """The node indices y needs (in graph order) and the constant initializers it reads."""
    producers = {}
    for idx, n in enumerate(graph.node):
        if n is ctx.node:
            continue
        for o in n.output:
            if o:
                producers[o] = idx
    inits = {t.name: t for t in graph.initializer}
    for sp in graph.sparse_initializer:
        if sp.values is not None:
            inits[sp.values.name] = sp
    graph_inputs = {vi.name for vi in graph.input}
    leaves = set(xs) | set(zs)
    needed, constants, seen = set(), {}, set()
    stack = [y]
    while stack:
        name = stack.pop()
        if name in seen or name in leaves:
            continue
        seen.add(name)
        if name in producers:
            idx = producers[name]
            if idx not in needed:
                node = graph.node[idx]
                if subgraphs_of(node):
                    ctx.fail(f"operator {node.op_type} (node {node.name!r}) on the way to y={y!r} carries a "
                             "subgraph; differentiating through control flow is not supported")
                needed.add(idx)
                stack.extend(n for n in node.input if n)
        elif name in inits and name not in graph_inputs:
            constants[name] = inits[name]
        elif name in ctx.node.output:
            ctx.fail(f"y={y!r} depends on {name!r}, an output of this Gradient node")
        elif name in graph_inputs:
            ctx.fail(f"y={y!r} depends on graph input {name!r}, which is in neither xs nor zs")
        else:
            ctx.fail(f"y={y!r} depends on {name!r}, which is neither in xs/zs nor computed in this graph")
    return sorted(needed), constants


@KERNELS.register("Gradient", 1, domain=DOMAIN, host_only=True)
@calls_blas
def gradient(ctx):
    xs, zs = _strs(ctx.attr("xs")), _strs(ctx.attr("zs"))
    y = (_strs(ctx.attr("y")) or [""])[0]
    if not xs or not y:
        ctx.fail("attributes xs and y are required")
    if set(xs) & set(zs):
        ctx.fail(f"{sorted(set(xs) & set(zs))} named in both xs and zs")
    if ctx.num_inputs != len(xs) + len(zs):
        ctx.fail(f"expected {len(xs) + len(zs)} inputs (the values of xs then zs), got {ctx.num_inputs}")
    if ctx.num_outputs > len(xs):
        ctx.fail(f"at most {len(xs)} outputs (one per xs), got {ctx.num_outputs}")
    graph = ctx.enclosing_graph
    if graph is None:
        ctx.fail("the enclosing graph is not known")
    opsets = ctx.opset_imports
    order, constants = _select(ctx, graph, xs, zs, y)

    # Nodes on a path from xs to y: each needs an exact rule for its bound definition.
    active = set(xs)
    steps = []
    for idx in order:
        node = graph.node[idx]
        hit = [bool(n) and n in active for n in node.input]
        if not any(hit):
            continue
        domain = normalize_domain(node.domain)
        what = f"operator {node.op_type} (node {node.name!r})"
        entry = _RULES.get(node.op_type) if is_default_domain(domain) else None
        if entry is None:
            ctx.fail(f"no gradient rule for {what} on the path from xs to y={y!r}")
        versions, diff, rule = entry
        version = opsets.get(domain)
        schema = ctx.definition(domain, node.op_type)
        if schema is None:
            ctx.fail(f"{what} has no definition at the imported operator set version {version}")
        if schema.since_version not in versions:
            ctx.fail(f"no gradient rule for {what} at definition {node.op_type}-{schema.since_version}")
        for i, h in enumerate(hit):
            if h and diff is not None and i not in diff:
                ctx.fail(f"{what}: input {i} ({node.input[i]!r}) depends on xs but is not differentiable")
        if len([o for o in node.output if o]) > 1:
            ctx.fail(f"no gradient rule for {what} with more than one output")
        steps.append(_Step(node, schema.since_version, node_attributes(schema, node), hit, rule))
        active.update(o for o in node.output if o)

    keep = [y] + [n for s in steps for n in s.inputs + [s.output] if n]
    keep = list(dict.fromkeys(keep))
    sub = ir.Graph(
        node=[graph.node[i] for i in order], name=f"Gradient {ctx.name!r} forward",
        initializer=[t for t in constants.values() if isinstance(t, ir.Tensor)],
        sparse_initializer=[t for t in constants.values() if not isinstance(t, ir.Tensor)],
        input=[ir.ValueInfo(n) for n in xs + zs], output=[ir.ValueInfo(n) for n in keep])
    forward = ctx.compile(sub, name=f"Gradient.{ctx.name or 'forward'}")
    n_out = ctx.num_outputs
    wanted = [ctx.output_requested(i) for i in range(n_out)]

    def fn(*args):
        for name, a in zip(xs, args):
            if a is None or not _is_float(np.asarray(a).dtype):
                ctx.fail(f"xs value {name!r} must be a float16, bfloat16, float32 or float64 tensor")
        cdt = np.float64 if any(np.asarray(a).dtype == np.float64 for a in args[:len(xs)]) else np.float32
        raw = dict(zip(keep, forward.run(list(args))))
        vals = _Values(raw, cdt)
        grads: dict = {}
        yv = raw[y]
        if y in active:
            if not _is_float(np.asarray(yv).dtype):
                ctx.fail(f"y={y!r} is not a floating-point tensor")
            grads[y] = np.ones(np.shape(yv), dtype=cdt)
        for s in reversed(steps):
            g = grads.get(s.output)
            if g is None:
                continue
            try:
                parts = s.rule(s, vals, g)
            except (ValueError, IndexError, TypeError) as exc:
                ctx.fail(f"gradient of {s.op} (node {s.node.name!r}): {type(exc).__name__}: {exc}")
            for name, want, part in zip(s.inputs, s.want, parts):
                if want and part is not None:
                    prev = grads.get(name)
                    grads[name] = part if prev is None else prev + part
        outs = []
        for i in range(n_out):
            if not wanted[i]:
                outs.append(None)
                continue
            x = np.asarray(args[i])
            g = grads.get(xs[i])
            if g is None:
                outs.append(np.zeros(x.shape, dtype=x.dtype))
            else:
                outs.append(np.asarray(g).reshape(x.shape).astype(x.dtype))
        return tuple(outs)

    return fn
