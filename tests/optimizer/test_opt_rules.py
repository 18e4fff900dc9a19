"""The rewrite-rule framework (onnxkit.runtime.optimizer.rules): products and sums matched in any
order and grouping, a division by a constant read as a factor, intermediates read only inside
the match, a pattern node read twice (a DAG), captured scalars; and the gelu rule through it."""

import math

import numpy as np

from optimizer_cases import TP, check_pass, helper, init, model

import onnxkit
from onnxkit.runtime.optimizer.rules import AnyOf, Rule, Scalar, Var, op
from onnxkit.runtime.optimizer.view import GraphView

a, b = Var("a"), Var("b")
SHAPE = [2, 3]


def _view(nodes, inits=(), outputs=("y",)):
    proto = model(nodes, [helper.make_tensor_value_info(n, TP.FLOAT, SHAPE) for n in ("a", "b")],
                  [helper.make_tensor_value_info(o, TP.FLOAT, None) for o in outputs], inits)
    return GraphView(onnxkit.load(proto.SerializeToString()))


def _c(name, value):
    return init(name, np.array(value, np.float32))


def _match(rule, view, output="y"):
    return rule.match(view, view.producer_of(output))


def _noop(view, match):
    raise AssertionError("not rewritten in these tests")


PRODUCT = Rule("product", a * b * 2.0, _noop, subject="a")


def test_a_product_matches_in_every_grouping_and_order():
    groupings = [
        [helper.make_node("Mul", ["a", "b"], ["t"]), helper.make_node("Mul", ["t", "two"], ["y"])],
        [helper.make_node("Mul", ["b", "two"], ["t"]), helper.make_node("Mul", ["a", "t"], ["y"])],
        [helper.make_node("Mul", ["two", "a"], ["t"]), helper.make_node("Mul", ["b", "t"], ["y"])],
    ]
    for nodes in groupings:
        found = _match(PRODUCT, _view(nodes, [_c("two", 2.0)]))
        assert found is not None
        assert {found["a"], found["b"]} == {"a", "b"} and found.constants == ["two"]
        assert len(found.nodes) == 2


def test_a_division_by_a_constant_is_a_factor_of_its_inverse():
    nodes = [helper.make_node("Mul", ["a", "b"], ["t"]), helper.make_node("Div", ["t", "half"], ["y"])]
    assert _match(PRODUCT, _view(nodes, [_c("half", 0.5)])) is not None
    wrong = [helper.make_node("Mul", ["a", "b"], ["t"]), helper.make_node("Div", ["t", "two"], ["y"])]
    assert _match(PRODUCT, _view(wrong, [_c("two", 2.0)])) is None     # t / 2 is t * 0.5, not t * 2
    divided_by_value = [helper.make_node("Mul", ["a", "two"], ["t"]), helper.make_node("Div", ["t", "b"], ["y"])]
    assert _match(PRODUCT, _view(divided_by_value, [_c("two", 2.0)])) is None


def test_an_intermediate_read_elsewhere_is_no_match():
    nodes = [helper.make_node("Mul", ["a", "b"], ["t"]), helper.make_node("Mul", ["t", "two"], ["y"]),
             helper.make_node("Neg", ["t"], ["z"])]
    assert _match(PRODUCT, _view(nodes, [_c("two", 2.0)], outputs=("y", "z"))) is None
    as_output = [helper.make_node("Mul", ["a", "b"], ["t"]), helper.make_node("Mul", ["t", "two"], ["y"])]
    assert _match(PRODUCT, _view(as_output, [_c("two", 2.0)], outputs=("y", "t"))) is None
    # the shared product is still one factor of a two-factor pattern
    pair = Rule("pair", Var("p") * 2.0, _noop)
    found = _match(pair, _view(nodes, [_c("two", 2.0)], outputs=("y", "z")))
    assert found is not None and found["p"] == "t"


def test_a_repeated_variable_is_one_value():
    square = Rule("square", a * a, _noop)
    assert _match(square, _view([helper.make_node("Mul", ["a", "a"], ["y"])])) is not None
    assert _match(square, _view([helper.make_node("Mul", ["a", "b"], ["y"])])) is None


def _guarded(extra=()):
    return [helper.make_node("Softmax", ["a"], ["p"]), helper.make_node("IsNaN", ["p"], ["n"]),
            helper.make_node("Where", ["n", "zero", "p"], ["y"]), *extra]


def test_a_pattern_node_read_twice_is_one_node_read_only_inside_the_match():
    soft = op.Softmax(a)
    guard = Rule("guard", op.Where(op.IsNaN(soft), 0.0, soft), _noop)
    found = _match(guard, _view(_guarded(), [_c("zero", 0.0)]))
    assert found is not None and len(found.nodes) == 3
    # the softmax read by one more node is no match; two different softmaxes are none either
    assert _match(guard, _view(_guarded([helper.make_node("Neg", ["p"], ["z"])]), [_c("zero", 0.0)],
                               outputs=("y", "z"))) is None
    two = [helper.make_node("Softmax", ["a"], ["p"]), helper.make_node("Softmax", ["a"], ["q"]),
           helper.make_node("IsNaN", ["p"], ["n"]), helper.make_node("Where", ["n", "zero", "q"], ["y"])]
    assert _match(guard, _view(two, [_c("zero", 0.0)])) is None


def test_a_captured_scalar_of_a_divisor_is_its_inverse():
    scaled = Rule("scaled", op.Relu(a) * Scalar("s"), _noop)
    found = _match(scaled, _view([helper.make_node("Relu", ["a"], ["r"]), helper.make_node("Div", ["r", "four"], ["y"])],
                                 [_c("four", 4.0)]))
    assert found is not None and found["s"] == 0.25
    found = _match(scaled, _view([helper.make_node("Relu", ["a"], ["r"]), helper.make_node("Mul", ["four", "r"], ["y"])],
                                 [_c("four", 4.0)]))
    assert found is not None and found["s"] == 4.0


def test_alternatives_are_tried_in_order():
    either = Rule("either", op.Neg(AnyOf((op.Relu(a), a))), _noop)
    found = _match(either, _view([helper.make_node("Relu", ["a"], ["r"]), helper.make_node("Neg", ["r"], ["y"])]))
    assert found["a"] == "a" and len(found.nodes) == 2
    found = _match(either, _view([helper.make_node("Neg", ["a"], ["y"])]))
    assert found["a"] == "a" and len(found.nodes) == 1


def test_gelu_with_a_division_by_two_for_the_half_is_fused():
    """``x * (1 + erf(x / sqrt 2)) / 2``: the 0.5 written as a division, one grouping the product
    rule covers with no rule of its own."""
    nodes = [helper.make_node("Div", ["x", "s"], ["t"]), helper.make_node("Erf", ["t"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["p"]), helper.make_node("Mul", ["x", "p"], ["m"]),
             helper.make_node("Div", ["m", "two"], ["y"])]
    proto = model(nodes, [helper.make_tensor_value_info("x", TP.FLOAT, [2, 3, 16])],
                  [helper.make_tensor_value_info("y", TP.FLOAT, [2, 3, 16])],
                  [_c("s", math.sqrt(2.0)), _c("one", 1.0), _c("two", 2.0)])
    feed = {"x": np.random.default_rng(3).uniform(-2, 2, (2, 3, 16)).astype(np.float32)}
    check_pass(proto, feed, "gelu", 1, ["Gelu"])
