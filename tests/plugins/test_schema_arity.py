"""An :class:`OpSchema` without explicit arity takes it from its formal parameters, so a newcomer's
first schema (``inputs=(x,), outputs=(y,)``) does not refuse every node that uses it."""

from __future__ import annotations

import pytest

from onnxkit.schema import UNBOUNDED, FormalParameter, OpSchema


def _schema(inputs=(), outputs=(), **kw):
    return OpSchema(domain="com.example", name="Op", since_version=1, inputs=inputs, outputs=outputs, **kw)


def test_arity_is_derived_from_the_parameters():
    s = _schema((FormalParameter("x", "T"),), (FormalParameter("y", "T"),))
    assert (s.min_input, s.max_input, s.min_output, s.max_output) == (1, 1, 1, 1)


def test_optional_and_variadic_parameters():
    opt = _schema((FormalParameter("x", "T"), FormalParameter("b", "T", "optional")))
    assert (opt.min_input, opt.max_input) == (1, 2)
    var = _schema((FormalParameter("x", "T"), FormalParameter("rest", "T", "variadic", min_arity=2)))
    assert (var.min_input, var.max_input) == (3, UNBOUNDED)
    none = _schema((FormalParameter("rest", "T", "variadic", min_arity=0),))
    assert (none.min_input, none.max_input) == (0, UNBOUNDED)
    leading_optional = _schema((FormalParameter("a", "T", "optional"), FormalParameter("b", "T")))
    assert (leading_optional.min_input, leading_optional.max_input) == (2, 2)


def test_explicit_arity_is_kept_and_checked():
    s = _schema((FormalParameter("x", "T"),), min_input=0, max_input=1)
    assert (s.min_input, s.max_input) == (0, 1)
    with pytest.raises(ValueError, match="min_input 2 and max_input 1"):
        _schema(min_input=2, max_input=1)


class _SwishPlugin:
    """A newcomer's domain: one schema written without arity, a portable kernel, no inference function."""

    from onnxkit.plugin import FormalParameter as _P, KernelTable, OperatorSet, TypeConstraint, hookimpl

    SCHEMA = OpSchema(domain="com.example", name="Swish", since_version=1, inputs=(_P("x", "T"),),
                      outputs=(_P("y", "T"),), type_constraints=(TypeConstraint("T", ("tensor(float)",)),))
    KERNELS = KernelTable()

    @staticmethod
    @hookimpl
    def onnxkit_operator_sets():
        return [_SwishPlugin.OperatorSet("com.example", 1, {"Swish": _SwishPlugin.SCHEMA})]

    @staticmethod
    @hookimpl
    def onnxkit_portable_kernels():
        return _SwishPlugin.KERNELS


@_SwishPlugin.KERNELS.register("Swish", 1, domain="com.example")
def _swish(ctx):
    xp = ctx.xp
    return lambda x: x / (1 + xp.exp(-x))


def test_a_schema_without_arity_accepts_its_nodes():
    import numpy as np

    from onnxkit import ir
    from onnxkit.registry import build_registry
    from onnxkit.runtime import InferenceSession

    graph = ir.Graph(node=[ir.Node(["x"], ["y"], name="s", op_type="Swish", domain="com.example")], name="g",
                     input=[ir.ValueInfo("x", ir.tensor_type(1, [3]))],
                     output=[ir.ValueInfo("y", ir.tensor_type(1, [3]))])
    model = ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 21), ir.OperatorSetId("com.example", 1)],
                     graph=graph)
    reg = build_registry(extra=[("swish", _SwishPlugin)])
    assert not reg.faults
    x = np.array([-1.0, 0.0, 2.0], np.float32)
    (y,) = InferenceSession(model, registry=reg).run(None, {"x": x})
    np.testing.assert_allclose(y, x / (1 + np.exp(-x)), rtol=1e-6)
