"""The plugin surface (issue 33 item 3): kernel capabilities as typed traits.

A kernel declares what it can do beyond computing its node as one :class:`KernelTraits`
(``onnxkit.plugin.needs_scope`` / ``binds_constants`` / ``offers_epilogue`` / ``host_only`` /
``declares_output_bytes``); the host reads them with ``traits_of`` only, and refuses the former
untyped function attributes by name instead of ignoring them.
"""

from __future__ import annotations

import numpy as np
import pytest

from onnxkit import ir
from onnxkit.errors import OnnxkitError
from onnxkit.kernel_traits import LEGACY_ATTRIBUTES
from onnxkit.plugin import (FormalParameter, KernelTable, KernelTraits, OperatorSet, OpSchema, TypeConstraint,
                            binds_constants, declare_traits, declares_output_bytes, hookimpl, host_only, needs_scope,
                            offers_epilogue, traits_of)
from onnxkit.registry import build_registry
from onnxkit.runtime import InferenceSession

DOMAIN = "org.onnxkit.test.traits"


def test_a_function_without_traits_declares_nothing():
    def fn(x):
        return x

    t = traits_of(fn)
    assert t == KernelTraits()
    assert (t.host_only, t.needs_scope, t.bind_constants, t.fuse_epilogue, t.epilogue_inputs, t.output_bytes) == (
        False, False, None, None, None, None)


def test_each_helper_declares_its_trait_and_they_accumulate():
    def fn(x, shape):
        return x

    def bind(shape):
        return None

    def fuse(ops):
        return None

    def predict(x, shape):
        return 0

    assert binds_constants(fn, bind, 1) is fn
    assert needs_scope(fn) is fn
    assert offers_epilogue(fn, fuse, 3) is fn
    assert declares_output_bytes(fn, predict) is fn
    assert host_only(fn) is fn
    t = traits_of(fn)
    assert t.bind_constants == (bind, (1,))
    assert t.needs_scope and t.host_only
    assert t.fuse_epilogue is fuse and t.epilogue_inputs == 3
    assert t.output_bytes is predict


def test_traits_are_frozen_and_checked():
    t = KernelTraits(needs_scope=True)
    with pytest.raises(Exception):
        t.needs_scope = False  # frozen
    with pytest.raises(TypeError, match="unknown kernel trait"):
        declare_traits(lambda x: x, needs_scopes=True)
    with pytest.raises(TypeError, match="must be callable"):
        declare_traits(lambda x: x, fuse_epilogue=3)
    with pytest.raises(TypeError, match="positions"):
        binds_constants(lambda x: x, lambda s: None)
    with pytest.raises(TypeError, match="cannot carry kernel traits"):
        needs_scope(len)


def test_every_former_capability_attribute_is_refused_by_name():
    assert len(LEGACY_ATTRIBUTES) == 6
    for name in LEGACY_ATTRIBUTES:
        def fn(x):
            return x
        setattr(fn, name, True)
        with pytest.raises(OnnxkitError, match=name):
            traits_of(fn)


TWICE = OpSchema(domain=DOMAIN, name="Twice", since_version=1,
                 inputs=(FormalParameter("x", "T"),), outputs=(FormalParameter("y", "T"),),
                 type_constraints=(TypeConstraint("T", ("tensor(float)",)),),
                 min_input=1, max_input=1, min_output=1, max_output=1)


def _registry(factory):
    table = KernelTable()
    table.register("Twice", 1, domain=DOMAIN)(factory)

    class Plugin:
        @hookimpl
        def onnxkit_operator_sets(self):
            return [OperatorSet(DOMAIN, 1, {"Twice": TWICE})]

        @hookimpl
        def onnxkit_portable_kernels(self):
            return table

    return build_registry(extra=[("traits_test", Plugin())])


def _model(constant=None):
    """``y = Twice(x)``; ``x`` a graph input, or an initializer holding ``constant``."""
    graph = ir.Graph(node=[ir.Node(["x"], ["y"], name="twice", op_type="Twice", domain=DOMAIN)], name="g",
                     input=[] if constant is not None else [ir.ValueInfo("x", ir.tensor_type(1, [2]))],
                     output=[ir.ValueInfo("y", ir.tensor_type(1, [2]))])
    if constant is not None:
        graph.initializer.append(ir.Tensor.from_numpy(constant, "x"))
    return ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 21), ir.OperatorSetId(DOMAIN, 1)], graph=graph)


def test_binds_constants_is_read_from_the_traits_by_the_run_loop():
    bound = []

    def factory(ctx):
        def run(x):
            return x * 2

        def bind(x):
            bound.append(x.tolist())
            return lambda x: x * 3     # distinguishable from run: shows which function the loop called
        return binds_constants(run, bind, 0)

    reg = _registry(factory)
    sess = InferenceSession(_model(np.array([1.0, 2.0], np.float32)), registry=reg, validate=False)
    (y,) = sess.run(None, {})
    np.testing.assert_array_equal(y, [3.0, 6.0])
    assert bound == [[1.0, 2.0]]
    sess = InferenceSession(_model(), registry=reg, validate=False)     # x not a constant: run is called
    (y,) = sess.run(None, {"x": np.array([1.0, 2.0], np.float32)})
    np.testing.assert_array_equal(y, [2.0, 4.0])


def test_a_kernel_with_an_untyped_capability_attribute_fails_planning_by_name():
    def factory(ctx):
        def run(scope, x):
            return x * 2
        run.needs_scope = True      # the former untyped declaration: refused, not ignored
        return run

    with pytest.raises(OnnxkitError, match="needs_scope"):
        InferenceSession(_model(), registry=_registry(factory), validate=False)


def test_a_host_only_portable_kernel_is_left_out_of_a_non_host_backend():
    def factory(ctx):
        return lambda x: x * 2

    reg = _registry(host_only(factory))
    assert traits_of(reg.portable[(DOMAIN, "Twice", 1)]).host_only
    assert reg.kernel("cpu", DOMAIN, "Twice", 1) is not None
    if "gpu" in reg.backends:
        assert reg.kernel("gpu", DOMAIN, "Twice", 1) is None


def test_the_built_in_kernels_declare_through_traits():
    reg = build_registry()
    portable = [traits_of(k) for k in reg.portable.values()]      # raises on an untyped attribute
    ml = [k for (d, _, _), k in reg.portable.items() if d == "ai.onnx.ml"]
    assert ml and all(traits_of(k).host_only for k in ml)
    assert any(t.host_only for t in portable)
    for table in reg.kernels.values():
        for k in table.values():
            traits_of(k)
