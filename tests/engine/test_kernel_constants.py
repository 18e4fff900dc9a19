"""Kernels are told which inputs are constants (issue 42, item 3): the planner declares them on
the :class:`~onnxkit.runtime.kernel.NodeContext` (``is_constant`` / ``constant``), and the cpu
kernels that keep what they derive from a weight (a convolution's product layout, Winograd's
tiles, BatchNormalization's scale and shift, an RNN's prepared weights, the quantized kernels'
centered weights) key on that declaration, read once by their factory, never on an array's
``writeable`` flag or its chain of ``base`` arrays.

* a source scan of every kernel module of the plugins: no ``flags.writeable`` read, no ``.base``;
* what the planner declares: initializers and folded values are constants; graph inputs, defaults
  (initializers a caller may feed), node outputs computed at run time are not; a subgraph sees its
  enclosing graph's constants; a node on the fallback backend too (its value held elsewhere);
* a weight fed as a graph input is used afresh at every run whatever it is — a read-only array
  whose contents were changed, a view (read-only or not) of an array written between runs, the
  same array written in place, a default fed and written — compared with a numpy reference; an
  initializer weight is derived once and stays right;
* the declared types the planner fills (``input_types`` / ``output_types``) and ``output_type``.
Expected values come from numpy references written here.
"""

from __future__ import annotations

import ast
import pathlib

import numpy as np
import pytest

from onnxkit import hookimpl, ir
from onnxkit.dtypes import DataType
from onnxkit.registry import Backend, build_registry
from onnxkit.runtime import InferenceSession, SessionOptions

REPO = pathlib.Path(__file__).resolve().parents[2]
T = ir.tensor_type
F32, I64 = int(DataType.FLOAT), int(DataType.INT64)
A = ir.Attribute.make


def _node(op, inputs, outputs, name=None, **attrs):
    return ir.Node(inputs, outputs, op_type=op, name=name or f"{op}_{outputs[0]}",
                   attribute=[A(k, v) for k, v in attrs.items()])


def _model(nodes, inputs, outputs, initializer=(), value_info=(), opset=21):
    g = ir.Graph(node=nodes, name="g", input=inputs, output=outputs, initializer=list(initializer),
                 value_info=list(value_info))
    return ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", opset)], graph=g)


def _vi(name, shape=None, elem=F32):
    return ir.ValueInfo(name, T(elem, shape))


def _const(name, value):
    return ir.Tensor.from_numpy(np.asarray(value), name=name)


# -- (a) no kernel decides constancy from an array's flags ------------------------------------------

#: the modules scanned: every kernel, override and compiled-loop module of the plugins
KERNEL_DIRS = ("kernels", "overrides", "compiled")
#: the legitimate uses, exactly: a kernel *setting* ``flags.writeable = False`` on an array it made
#: (protection, and one numba signature), never reading it: (module, function)
ALLOWED_WRITEABLE_STORES = {
    ("plugins/cpu_backend/onnxkit_cpu/overrides/conv.py", "read_only_view"),
    ("plugins/cpu_backend/onnxkit_cpu/overrides/linalg.py", "zero_row"),   # the shared row of zeros Relu reads
    ("plugins/default_domain/onnxkit_default_domain/kernels/generators.py", "constant"),
}


def _kernel_modules() -> list:
    found = []
    for path in sorted((REPO / "plugins").glob("*/onnxkit_*/**/*.py")):
        parts = path.relative_to(REPO / "plugins").parts
        if len(parts) >= 3 and parts[2] in KERNEL_DIRS:
            found.append(path)
    return found


def constancy_tests(source: str) -> tuple:
    """``(reads, stores)`` in ``source``: ``reads`` lists every way of reading an array's
    ``writeable`` flag or following its ``base`` (``a.flags.writeable``, ``a.flags['WRITEABLE']``,
    ``getattr(a, 'base')``, ``a.base``, a name ``unchanging``) as ``(line, text)``; ``stores``
    every ``x.flags.writeable = value`` as ``(line, enclosing function, value)``."""
    tree = ast.parse(source)
    parents = {}
    for parent in ast.walk(tree):
        for child in ast.iter_child_nodes(parent):
            parents[child] = parent

    def function_of(n):
        while n in parents:
            n = parents[n]
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return n.name
        return None

    reads, stores = [], []
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and n.attr == "writeable":
            if isinstance(n.ctx, ast.Store):
                assign = parents.get(n)
                value = assign.value if isinstance(assign, ast.Assign) else None
                stores.append((n.lineno, function_of(n), ast.unparse(value) if value is not None else "?"))
            else:
                reads.append((n.lineno, ast.unparse(n)))
        elif isinstance(n, ast.Attribute) and n.attr in ("base", "setflags"):
            reads.append((n.lineno, ast.unparse(n)))
        elif isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) \
                and n.slice.value in ("WRITEABLE", "W", "OWNDATA", "O") and "flags" in ast.unparse(n.value):
            reads.append((n.lineno, ast.unparse(n)))
        elif isinstance(n, ast.Constant) and n.value in ("base", "writeable", "WRITEABLE") \
                and isinstance(parents.get(n), ast.Call):
            reads.append((n.lineno, ast.unparse(parents[n])))
        elif isinstance(n, ast.Name) and n.id == "unchanging":
            reads.append((n.lineno, n.id))
    return reads, stores


def test_the_scan_finds_the_constancy_tests_it_forbids():
    source = (
        "def k(w, cache):\n"
        "    if not w.flags.writeable and w.base is None:\n"
        "        cache[0] = w\n"
        "    ok = w.flags['WRITEABLE'] or getattr(w, 'base') or unchanging(w)\n"
        "def fresh():\n"
        "    a = make()\n"
        "    a.flags.writeable = False\n"
    )
    reads, stores = constancy_tests(source)
    assert sorted(line for line, _ in reads) == [2, 2, 4, 4, 4]
    assert stores == [(7, "fresh", "False")]


def test_no_kernel_reads_writeable_flags_or_base_chains():
    modules = _kernel_modules()
    assert len(modules) > 100     # the scan sees the plugins' kernels (not an empty glob)
    bad, stores = [], set()
    for path in modules:
        rel = path.relative_to(REPO).as_posix()
        reads, made = constancy_tests(path.read_text(encoding="utf-8"))
        bad += [f"{rel}:{line}: {text}" for line, text in reads]
        for line, function, value in made:
            assert value == "False", f"{rel}:{line}: a kernel may only clear the flag (got {value})"
            stores.add((rel, function))
    assert not bad, "kernels must learn constancy from ctx.is_constant, not from arrays:\n" + "\n".join(bad)
    assert stores == ALLOWED_WRITEABLE_STORES and len(stores) == 3


def test_the_former_helpers_are_gone():
    import onnxkit_cpu.overrides._plans as plans
    import onnxkit_cpu.overrides.conv as conv

    assert not hasattr(plans, "unchanging")
    assert not hasattr(conv, "frozen")


# -- (b) what the planner declares -------------------------------------------------------------------

@pytest.fixture(scope="module")
def registry():
    return build_registry()


def _spy(monkeypatch, registry, op, since, backend="cpu"):
    """Record, per node name, what the factory of ``op`` is told: (is_constant per input,
    constant per input, input_types, output_types, output_type(0), default per input)."""
    table = registry.kernels[backend]
    key = ("", op, since)
    real = table[key]
    seen = {}

    def factory(ctx):
        n = ctx.num_inputs
        seen[ctx.name] = ([ctx.is_constant(i) for i in range(n)], [ctx.constant(i) for i in range(n)],
                         list(ctx.input_types), list(ctx.output_types), ctx.output_type(0),
                         [ctx.default(i) for i in range(n)])
        return real(ctx)

    monkeypatch.setitem(table, key, factory)
    return seen


def _adds_kept() -> SessionOptions:
    """Options keeping the model's Adds steps of their own (no Elementwise region of them)."""
    so = SessionOptions()
    so.add_session_config_entry("session.disable_passes", "elementwise")
    return so


def _declaring_model():
    """x (graph input), d (a default: an initializer that is also an input), w (an initializer),
    two (an initializer), c = w * two (folded at planning), and Adds reading each kind; an If
    whose branch reads the enclosing graph's w and x."""
    then_branch = ir.Graph(node=[_node("Add", ["w", "x"], ["t"], name="inner")], name="then", input=[],
                           output=[_vi("t", [3])])
    else_branch = ir.Graph(node=[_node("Neg", ["x"], ["e"], name="neg")], name="else", input=[],
                           output=[_vi("e", [3])])
    nodes = [_node("Mul", ["w", "two"], ["c"], name="fold"),
             _node("Add", ["x", "w"], ["a1"], name="x_w"),
             _node("Add", ["x", "d"], ["a2"], name="x_d"),
             _node("Add", ["a1", "c"], ["a3"], name="out_folded"),
             _node("Add", ["a3", "a2"], ["y"], name="out_out"),
             _node("If", ["cond"], ["z"], name="if", then_branch=then_branch, else_branch=else_branch)]
    w = np.array([1.0, 2.0, 3.0], np.float32)
    inits = [_const("w", w), _const("two", np.float32(2)), _const("d", np.array([10.0, 20.0, 30.0], np.float32))]
    m = _model(nodes, [_vi("x", [3]), _vi("d", [3]), _vi("cond", [], int(DataType.BOOL))],
               [_vi("y", [3]), _vi("z", [3])], inits, value_info=[_vi("a1", [3])])
    return m, w


def test_is_constant_declares_initializers_and_folded_values_only(monkeypatch, registry):
    seen = _spy(monkeypatch, registry, "Add", 14)
    m, w = _declaring_model()
    sess = InferenceSession(m, _adds_kept(), registry=registry, validate=False)
    assert seen["x_w"][0] == [False, True]            # graph input; initializer
    np.testing.assert_array_equal(seen["x_w"][1][1], w)
    assert seen["x_w"][1][0] is None
    assert seen["x_d"][0] == [False, False]           # a default may be fed: not a constant
    assert seen["x_d"][1] == [None, None]
    assert seen["x_d"][5][0] is None                  # ... it is the plan's default, though
    np.testing.assert_array_equal(seen["x_d"][5][1], [10.0, 20.0, 30.0])
    assert seen["x_w"][5] == [None, None]             # a constant is no default
    assert seen["out_folded"][0] == [False, True]     # a node output; a value folded at planning
    np.testing.assert_array_equal(seen["out_folded"][1][1], w * 2)
    assert seen["out_out"][0] == [False, False]       # node outputs computed at run time
    assert seen["inner"][0] == [True, False]          # the enclosing graph's initializer; its input
    x = np.array([1.0, -1.0, 0.5], np.float32)
    y, z = sess.run(None, {"x": x, "cond": np.array(True)})
    np.testing.assert_array_equal(y, (x + w) + 2 * w + (x + np.float32([10, 20, 30])))
    np.testing.assert_array_equal(z, w + x)


def test_a_node_on_the_fallback_is_told_its_constants(monkeypatch):
    """A node its backend cannot compute runs on the fallback (cpu) kernel: the initializer it
    reads is still declared a constant, its value (held on the other backend) is not handed out."""

    class Boxed:
        @hookimpl
        def onnxkit_backends(self):
            return [Backend(name="boxed", asarray=lambda a: a, to_numpy=lambda v: v,
                            element_types=frozenset({F32}), fallback="cpu")]

        @hookimpl
        def onnxkit_kernels(self, backend):
            return None

    reg = build_registry(extra=[("boxed_constants_test", Boxed())])
    seen = _spy(monkeypatch, reg, "Add", 14)
    m = _model([_node("Add", ["x", "w"], ["y"], name="add")], [_vi("x", [2])], [_vi("y", [2])],
               [_const("w", np.array([1.0, 2.0], np.float32))])
    sess = InferenceSession(m, "boxed", registry=reg, validate=False)
    assert [fb.node for fb in sess.fallbacks] == ["add"]
    assert seen["add"][0] == [False, True] and seen["add"][1] == [None, None]
    np.testing.assert_array_equal(sess.run(None, {"x": np.array([1.0, 1.0], np.float32)})[0], [2.0, 3.0])


def test_the_planner_fills_the_declared_types(monkeypatch, registry):
    seen = _spy(monkeypatch, registry, "Add", 14)
    m, _ = _declaring_model()
    InferenceSession(m, _adds_kept(), registry=registry, validate=False)
    in_types, out_types, inferred = seen["x_w"][2], seen["x_w"][3], seen["x_w"][4]
    assert in_types == [T(F32, [3]), T(F32, [3])]     # the graph input's declaration; the initializer's
    assert out_types == [T(F32, [3])]                 # a1's value_info
    assert inferred == T(F32, [3])
    assert seen["x_d"][3] == [None]                   # a2: declared nowhere
    assert seen["x_d"][4] is not None and seen["x_d"][4].elem_type == F32   # ... inferred
    assert seen["out_out"][3] == [T(F32, [3])]        # y: a graph output
    assert seen["inner"][2] == [T(F32, [3]), T(F32, [3])]   # read from the enclosing graph


# -- (c) runtime weights are used afresh, constants are kept ------------------------------------

def ref_conv(x, w, b, pads, group, strides=(1, 1)):
    """Direct 2-D convolution in float64."""
    (t, l, bo, r), (sh, sw) = pads, strides
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (t, bo), (l, r)))
    m, cg, kh, kw = w.shape
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw]
    mg = m // group
    outs = [np.einsum("nchwij,mcij->nmhw", win[:, g * cg:(g + 1) * cg], w[g * mg:(g + 1) * mg].astype(np.float64))
            for g in range(group)]
    y = np.concatenate(outs, axis=1)
    return y if b is None else y + b.reshape(1, -1, 1, 1)


class Weight:
    """A weight fed at each run as the same object, whose contents change between runs:
    ``readonly`` (a read-only array owning its data: its flag cleared again after each write),
    ``readonly_view`` (a read-only view of a writeable array), ``view`` (a writeable strided view
    of a larger array), ``inplace`` (a writeable array written in place)."""

    def __init__(self, rng, shape, mode):
        self.rng, self.mode, self.shape = rng, mode, shape
        if mode == "view":
            self.base = rng.standard_normal((2,) + shape).astype(np.float32)
            self.value = self.base[1]
        else:
            self.base = rng.standard_normal(shape).astype(np.float32)
            self.value = self.base
            if mode == "readonly_view":
                self.value = self.base.view()
                self.value.flags.writeable = False
            elif mode == "readonly":
                self.base.flags.writeable = False

    def change(self):
        if self.mode == "readonly":
            self.base.flags.writeable = True
        self.base[...] = self.rng.standard_normal(self.base.shape).astype(np.float32)
        if self.mode == "readonly":
            self.base.flags.writeable = False

    def now(self):
        return np.array(self.value)


MODES = ("readonly", "readonly_view", "view", "inplace")
#: (X shape, W shape, attributes): the cpu Conv's kinds (compiled planes, 1x1, depthwise, Winograd, patches)
CONVS = {
    "planes": ((1, 2, 6, 6), (4, 2, 3, 3), {}),
    "pointwise": ((1, 2, 5, 5), (4, 2, 1, 1), {}),
    "depthwise": ((1, 4, 6, 6), (4, 1, 3, 3), {"group": 4}),
    "winograd": ((1, 24, 12, 12), (16, 24, 3, 3), {"pads": [1, 1, 1, 1]}),
    "patches": ((1, 2, 16, 16), (3, 2, 8, 8), {"strides": [8, 8]}),
}


def _session(model, level=99):
    so = SessionOptions()
    so.graph_optimization_level = level
    return InferenceSession(model, so, validate=False)


def _check(got, want, what):
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4, err_msg=what)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", sorted(CONVS))
def test_a_conv_weight_fed_as_an_input_is_fresh_at_every_run(kind, mode):
    xs, ws, attrs = CONVS[kind]
    rng = np.random.default_rng(3)
    m = _model([_node("Conv", ["X", "W", "B"], ["Y"], **attrs)], [_vi("X", xs), _vi("W", ws), _vi("B", ws[:1])],
               [_vi("Y")])
    sess = _session(m)
    x = rng.standard_normal(xs).astype(np.float32)
    w, b = Weight(rng, ws, mode), Weight(rng, ws[:1], mode)
    pads = attrs.get("pads", [0, 0, 0, 0])
    for run in range(3):
        want = ref_conv(x, w.now(), b.now(), pads, attrs.get("group", 1), attrs.get("strides", (1, 1)))
        _check(sess.run(None, {"X": x, "W": w.value, "B": b.value})[0], want, f"{kind} {mode} run {run}")
        w.change()
        b.change()


def test_a_default_weight_fed_and_written_is_fresh_at_every_run():
    """W is an initializer that is also a graph input (a default): not a constant of the plan.
    Runs alternate between the default and the same fed array, fed twice in a row, written in
    place in between."""
    rng = np.random.default_rng(4)
    w0 = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)   # a constant B: the product's W with B is a copy
    m = _model([_node("Conv", ["X", "W", "B"], ["Y"])], [_vi("X", (1, 2, 6, 6)), _vi("W", (4, 2, 3, 3))], [_vi("Y")],
               [_const("W", w0), _const("B", b)])
    sess = _session(m)
    x = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    fed = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    for run in range(3):
        _check(sess.run(None, {"X": x})[0], ref_conv(x, w0, b, [0] * 4, 1), f"default, run {run}")
        for again in range(2):
            _check(sess.run(None, {"X": x, "W": fed})[0], ref_conv(x, fed, b, [0] * 4, 1), f"fed, run {run}.{again}")
            fed[...] = rng.standard_normal(fed.shape).astype(np.float32)


@pytest.mark.parametrize("mode", MODES)
def test_batch_norm_parameters_fed_as_inputs_are_fresh_at_every_run(mode):
    rng = np.random.default_rng(5)
    c, eps = 4, 1e-5
    names = ["scale", "B", "mean", "var"]
    m = _model([_node("BatchNormalization", ["X", *names], ["Y"], epsilon=eps)],
               [_vi("X", (2, c, 3, 3))] + [_vi(n, (c,)) for n in names], [_vi("Y")])
    sess = _session(m)
    x = rng.standard_normal((2, c, 3, 3)).astype(np.float32)
    params = {n: Weight(rng, (c,), mode) for n in names}
    for run in range(3):
        p = {n: params[n].now().astype(np.float64).reshape(1, c, 1, 1) for n in names}
        want = (x - p["mean"]) / np.sqrt(np.abs(p["var"]) + eps) * p["scale"] + p["B"]
        feed = {n: params[n].value for n in names}
        var = params["var"]
        if var.mode == "readonly":
            var.base.flags.writeable = True
        np.abs(var.base, out=var.base)              # a variance is not negative
        if var.mode == "readonly":
            var.base.flags.writeable = False
        _check(sess.run(None, {"X": x, **feed})[0], want, f"{mode} run {run}")
        for w in params.values():
            w.change()


@pytest.mark.parametrize("mode", ["readonly", "view"])
def test_lstm_weights_fed_as_inputs_are_fresh_at_every_run(mode):
    """The LSTM's prepared weights follow a fed W and R (compared with a session on copies)."""
    rng = np.random.default_rng(6)
    seq, batch, inp, hid = 3, 2, 3, 4
    m = _model([_node("LSTM", ["X", "W", "R"], ["Y"], hidden_size=hid)],
               [_vi("X", (seq, batch, inp)), _vi("W", (1, 4 * hid, inp)), _vi("R", (1, 4 * hid, hid))], [_vi("Y")])
    sess, fresh = _session(m), _session(m)
    x = rng.standard_normal((seq, batch, inp)).astype(np.float32)
    w, r = Weight(rng, (1, 4 * hid, inp), mode), Weight(rng, (1, 4 * hid, hid), mode)
    previous = None
    for run in range(3):
        got = sess.run(None, {"X": x, "W": w.value, "R": r.value})[0]
        want = fresh.run(None, {"X": x, "W": w.now(), "R": r.now()})[0]   # new arrays each run
        _check(got, want, f"{mode} run {run}")
        assert previous is None or not np.allclose(got, previous)
        previous = got
        w.change()
        r.change()


def test_an_initializer_weight_is_derived_once_and_stays_right(monkeypatch):
    """The planner declares the initializer W (and a folded W * 2) constants: the Conv derives
    their layouts on the first run only (every ``kept`` decision says constant), results right."""
    import onnxkit_cpu.overrides.conv as cpu_conv

    decided = []
    real = cpu_conv.kept
    monkeypatch.setattr(cpu_conv, "kept", lambda constant, v, derived: decided.append(constant) or
                        real(constant, v, derived))
    rng = np.random.default_rng(7)
    w = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    nodes = [_node("Mul", ["W", "two"], ["W2"]), _node("Conv", ["X", "W"], ["Y1"]), _node("Conv", ["X", "W2"], ["Y2"])]
    m = _model(nodes, [_vi("X", (1, 2, 6, 6))], [_vi("Y1"), _vi("Y2")], [_const("W", w), _const("two", np.float32(2))])
    sess = _session(m, level=0)
    x = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    for run in range(3):
        y1, y2 = sess.run(None, {"X": x})
        _check(y1, ref_conv(x, w, None, [0] * 4, 1), f"initializer, run {run}")
        _check(y2, ref_conv(x, 2 * w, None, [0] * 4, 1), f"folded, run {run}")
        if run == 0:
            assert len(decided) >= 2 and all(decided), decided
            first = len(decided)
    assert len(decided) == first


def test_a_folded_value_never_changes_with_memory_it_viewed():
    """A folded value is declared constant, so it must not change: a kernel's result that views
    writeable memory (which its owner may write later) is replaced by a read-only copy, a fresh
    array owning its memory is made read-only itself (:func:`onnxkit.runtime.plan.frozen`)."""
    from onnxkit.runtime.plan import frozen

    base = np.arange(6.0)
    value = frozen(base[1:4])
    base[:] = -1.0
    assert value.tolist() == [1.0, 2.0, 3.0] and not value.flags.writeable
    owner = np.arange(3.0)
    assert frozen(owner) is owner and not owner.flags.writeable


def _default_weight(w, b):
    """W a default (an initializer that is also an input, as every initializer of an IR < 4
    model), read by the Conv directly."""
    return (_model([_node("Conv", ["X", "W", "B"], ["Y"])], [_vi("X", (1, 2, 6, 6)), _vi("W", (4, 2, 3, 3))],
                   [_vi("Y")], [_const("W", w), _const("B", b)]), "W")


def _weight_computed_from_a_default(w, b):
    """W = Identity(w), w a default (as the ONNX light models' weights made from their defaults):
    a node output when the Conv is planned, a constant of the plan that folds the defaults."""
    return (_model([_node("Identity", ["w"], ["W"]), _node("Conv", ["X", "W", "B"], ["Y"])],
                   [_vi("X", (1, 2, 6, 6)), _vi("w", (4, 2, 3, 3))], [_vi("Y")], [_const("w", w), _const("B", b)]),
            "w")


@pytest.mark.parametrize("build", [_default_weight, _weight_computed_from_a_default])
def test_a_weight_the_plan_holds_while_no_default_is_fed_is_derived_once(build, monkeypatch):
    """Not a constant when the Conv is planned, but while a run feeds no default the kernel gets
    an object the plan holds: the default itself (``ctx.default``) or a value of the plan that
    folds the defaults (``ctx.holds``), whose layout it keeps; a fed array is derived at each run."""
    import onnxkit_cpu.overrides.conv as cpu_conv

    decided = []
    real = cpu_conv.kept
    monkeypatch.setattr(cpu_conv, "kept", lambda held, v, derived: decided.append(held) or real(held, v, derived))
    rng = np.random.default_rng(9)
    w = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    m, fed_name = build(w, b)
    sess = _session(m, level=0)
    x = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    for run in range(3):
        _check(sess.run(None, {"X": x})[0], ref_conv(x, w, b, [0] * 4, 1), f"held, run {run}")
        if run == 0:
            assert decided and all(decided), decided
            first = len(decided)
    assert len(decided) == first
    fed = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    for run in range(2):
        _check(sess.run(None, {"X": x, fed_name: fed})[0], ref_conv(x, fed, b, [0] * 4, 1), f"fed, run {run}")
        fed += 1
    assert len(decided) > first and not all(decided[first:])


def test_a_weight_the_specializer_folds_is_not_declared_and_stays_right():
    """W = Reshape(w, Shape(X)-derived target): the shape specializer folds it per input shape,
    after the Conv's kernel was made (so undeclared: derived at each run); results stay right."""
    rng = np.random.default_rng(8)
    w = rng.standard_normal((4 * 2 * 3 * 3,)).astype(np.float32)
    nodes = [_node("Shape", ["X"], ["xs"]), _node("Gather", ["xs", "one"], ["c"], axis=0),
             _node("Concat", ["four", "c", "three", "three"], ["target"], axis=0),
             _node("Reshape", ["w", "target"], ["W"]), _node("Conv", ["X", "W"], ["Y"])]
    inits = [_const("w", w), _const("one", np.array([1], np.int64)), _const("four", np.array([4], np.int64)),
             _const("three", np.array([3], np.int64))]
    m = _model(nodes, [_vi("X", ("N", 2, 6, 6))], [_vi("Y")], inits)
    sess = _session(m)
    for run in range(3):
        x = rng.standard_normal((1 + run % 2, 2, 6, 6)).astype(np.float32)
        _check(sess.run(None, {"X": x})[0], ref_conv(x, w.reshape(4, 2, 3, 3), None, [0] * 4, 1), f"run {run}")
