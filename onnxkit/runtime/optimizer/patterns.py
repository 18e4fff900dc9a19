"""The questions several passes ask of a :class:`~.view.GraphView`, public here so that no pass
imports another's private names: the fused domain, the element types fusions rewrite, whether a
constant keeps a value's shape, whether a BatchNormalization is in inference mode."""

from __future__ import annotations

from ...dtypes import ELEMENT_TYPES
from .view import GraphView

#: the domain of onnxkit's fused operators (plugins/default_domain: onnxkit_default_domain.fused)
FUSED_DOMAIN = "ai.onnxkit"
#: element types the fusions rewrite: float, float16, double, bfloat16
FLOAT_TAGS = (1, 10, 11, 16)


#: how far (relative) a pattern's constant may be from the formula's (exporters round to float32)
SCALAR_RTOL = 1e-6


def keeps_shape(view: GraphView, c, x: str) -> bool:
    """True if the one-element constant array ``c`` combined elementwise (broadcasting) with a
    value of ``x``'s shape leaves that shape as it is: ``c`` has ``x``'s element type and a rank
    no higher than ``x``'s — a 0-d ``c`` always, a ``[1, ..., 1]`` one only where type inference
    (:meth:`~.view.GraphView.tensor_type`: checked inputs, no declarations) knows ``x``'s rank.
    A ``[1, 1, 1, 1, 1]`` constant times a rank-1 ``x`` is rank 5: a fused node keeping ``x``'s
    shape would drop those axes."""
    typed = view.tensor_type(x)
    if c is None or c.size != 1 or typed is None or ELEMENT_TYPES.get(typed[0]) is None \
            or c.dtype != ELEMENT_TYPES[typed[0]].dtype:
        return False
    return c.ndim == 0 or (typed[1] is not None and c.ndim <= len(typed[1]))


def float_input(view: GraphView, x: str) -> bool:
    """True if type inference gives ``x`` a floating-point tensor type the fusions rewrite."""
    typed = view.tensor_type(x)
    return typed is not None and typed[0] in FLOAT_TAGS


def inference_batch_norm(view: GraphView, bn) -> bool:
    """True if the BatchNormalization ``bn`` computes in inference mode with one output and its
    five inputs given: ``is_test`` 1 and ``spatial`` 1 before opset 7, ``spatial`` 1 before 9,
    ``training_mode`` 0 from 14 (Part 2, BatchNormalization's versions)."""
    if any(o for o in bn.output[1:]) or len(bn.input) != 5 or not all(bn.input):
        return False
    version = view.version("")
    if version < 7:
        return bn.attr("is_test", 0) == 1 and bn.attr("spatial", 1) == 1
    if version < 9 and bn.attr("spatial", 1) != 1:
        return False
    return bn.attr("training_mode", 0) == 0
