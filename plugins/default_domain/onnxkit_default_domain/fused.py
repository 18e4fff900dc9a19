"""``ai.onnxkit``: onnxkit's own operators, the targets of the optimizer's fusions.

The graph optimizer (``onnxkit.runtime.optimizer``) rewrites subgraphs that exporters emit
into one node.  Where the model's ai.onnx operator set has the operator (e.g. Gelu from
ai.onnx 20) the fused node is the ai.onnx one; below that it is this domain's definition of
the same operator, with the same inputs, outputs, attributes, element types and semantics, so
an optimized model written with ``onnxkit run --optimized-model`` checks clean with onnxkit
(onnxruntime's optimizer does the same with its com.microsoft operators).  Version 1:

* ``Gelu`` — ai.onnx Gelu-20 (``approximate`` 'none' or 'tanh');
* ``HardSwish`` — ai.onnx HardSwish-14.

Version 2 (version 1's operators unchanged, plus):

* ``Attention`` — ai.onnx Attention-23 (inputs, outputs, attributes, types, semantics) with one
  more attribute, ``nan_to_zero`` (int, default 0).  With 1 a softmax probability that is NaN is
  taken as 0 before the product with V — the guard ``Where(IsNaN(p), 0, p)`` the torch exporters
  put after the softmax of scaled dot-product attention (a row whose scores are all -inf, or hold
  a NaN or +inf, then contributes zeros).  With 0 it is ai.onnx Attention-23 except that the
  softmax is the plain Softmax of the unfused pattern: a row whose scores are all -inf gives NaN
  (onnxruntime's Attention-23 does so too; onnxkit's ai.onnx Attention-23 gives zeros there).

Version 3 (version 2's operators unchanged, plus):

* ``LookupTable`` — ``Y = body(X)`` where ``X`` is an 8-bit tensor (uint8 or int8) and the
  GRAPH attribute ``body`` (required) maps a tensor of ``X``'s type to one 8-bit tensor (uint8 or
  int8) of the same number of elements, each output element a function of the input element at
  the same position alone.  ``Y`` has ``X``'s shape and the body output's element type; ``Y[i]``
  is the body's value at the code ``X[i]``: a kernel may evaluate the body once on the 256 codes
  of the type and look each element up (the body is read for nothing else; it reads no name of
  the enclosing graph).  The optimizer's 8-bit lookup-table fusion writes it
  (``onnxkit.runtime.optimizer.qlut``, whose docstring says which bodies qualify).

Version 4 (version 3's operators unchanged, plus):

* ``Elementwise`` — ``Y = body(X_0, ..., X_k)`` where every ``X_i`` is a float tensor (float32)
  and the GRAPH attribute ``body`` (required) maps ``k + 1`` tensors of those types, in order,
  to one tensor of their type by elementwise operators of the default domain alone (each output
  element a function of its inputs' elements at the same position, after the multidirectional
  broadcast of Clause 10's rules): ``Y`` is the body's result, of the broadcast shape of the
  inputs.  A kernel may run the body's nodes as they are, or compute each element of ``Y`` from
  the inputs' elements at its position in one pass (the body reads no name of the enclosing
  graph).  The optimizer's elementwise-region fusion writes it
  (``onnxkit.runtime.optimizer.elementwise``, whose docstring says which regions qualify).
"""

from __future__ import annotations

from functools import lru_cache

from onnxkit.plugin import records

from onnxkit.plugin import OperatorSet

#: the domain of onnxkit's fused operators
FUSED_DOMAIN = "ai.onnxkit"
#: ai.onnx definitions each fused operator of version 1 takes its signature and semantics from
SAME_AS = {"Gelu": 20, "HardSwish": 14}
#: the ai.onnx Attention definition ai.onnxkit Attention-2 extends with ``nan_to_zero``
ATTENTION_BASE = 23


@lru_cache(maxsize=1)
def definitions() -> dict:
    """``{op_type: OpSchema}`` of ai.onnxkit 1, each the ai.onnx definition of :data:`SAME_AS`
    under this domain."""
    from .schemas import schema_data

    return {op: records.evolve(schema_data().definition(("", op, v)), domain=FUSED_DOMAIN, since_version=1)
            for op, v in SAME_AS.items()}


@lru_cache(maxsize=1)
def definitions_v2() -> dict:
    """``{op_type: OpSchema}`` in force at ai.onnxkit 2: version 1's and Attention-2."""
    from onnxkit.plugin import AttributeDef, AttributeType

    from .schemas import schema_data

    base = schema_data().definition(("", "Attention", ATTENTION_BASE))
    extra = AttributeDef(name="nan_to_zero", type=AttributeType.INT, required=False, default_value=0)
    attention = records.evolve(base, domain=FUSED_DOMAIN, since_version=2,
                             attributes=dict(base.attributes, nan_to_zero=extra))
    return dict(definitions(), Attention=attention)


@lru_cache(maxsize=1)
def definitions_v3() -> dict:
    """``{op_type: OpSchema}`` in force at ai.onnxkit 3: version 2's and LookupTable-3."""
    from onnxkit.plugin import AttributeDef, AttributeType, FormalParameter, OpSchema, TypeConstraint

    eight_bit = ("tensor(uint8)", "tensor(int8)")
    table = OpSchema(domain=FUSED_DOMAIN, name="LookupTable", since_version=3,
                     inputs=(FormalParameter("X", "T1"),), outputs=(FormalParameter("Y", "T2"),),
                     attributes={"body": AttributeDef(name="body", type=AttributeType.GRAPH, required=True)},
                     type_constraints=(TypeConstraint("T1", eight_bit), TypeConstraint("T2", eight_bit)))
    return dict(definitions_v2(), LookupTable=table)


@lru_cache(maxsize=1)
def definitions_v4() -> dict:
    """``{op_type: OpSchema}`` in force at ai.onnxkit 4: version 3's and Elementwise-4."""
    from onnxkit.plugin import AttributeDef, AttributeType, FormalParameter, OpSchema, TypeConstraint

    region = OpSchema(domain=FUSED_DOMAIN, name="Elementwise", since_version=4,
                      inputs=(FormalParameter("X", "T", option="variadic"),), outputs=(FormalParameter("Y", "T"),),
                      attributes={"body": AttributeDef(name="body", type=AttributeType.GRAPH, required=True)},
                      type_constraints=(TypeConstraint("T", ("tensor(float)",)),))
    return dict(definitions_v3(), Elementwise=region)


def operator_sets() -> list:
    """ai.onnxkit versions 1, 2, 3 and 4."""
    return [OperatorSet(FUSED_DOMAIN, 1, definitions), OperatorSet(FUSED_DOMAIN, 2, definitions_v2),
            OperatorSet(FUSED_DOMAIN, 3, definitions_v3), OperatorSet(FUSED_DOMAIN, 4, definitions_v4)]
