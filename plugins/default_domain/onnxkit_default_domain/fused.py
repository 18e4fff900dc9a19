"""``ai.onnxkit``: onnxkit's own operators, the targets of the optimizer's fusions.

The graph optimizer (``onnxkit.runtime.optimizer``) rewrites subgraphs that exporters emit
into one node.  Where the model's ai.onnx operator set has the operator (e.g. Gelu from
ai.onnx 20) the fused node is the ai.onnx one; below that it is this domain's definition of
the same operator, with the same inputs, outputs, attributes, element types and semantics, so
an optimized model written with ``onnxkit run --optimized-model`` checks clean with onnxkit
(onnxruntime's optimizer does the same with its com.microsoft operators).  Version 1:

* ``Gelu`` — ai.onnx Gelu-20 (``approximate`` 'none' or 'tanh');
* ``HardSwish`` — ai.onnx HardSwish-14.
"""

from __future__ import annotations

from functools import lru_cache

import attrs

from onnxkit.plugin import OperatorSet

#: the domain of onnxkit's fused operators
FUSED_DOMAIN = "ai.onnxkit"
#: ai.onnx definitions each fused operator of version 1 takes its signature and semantics from
SAME_AS = {"Gelu": 20, "HardSwish": 14}


@lru_cache(maxsize=1)
def definitions() -> dict:
    """``{op_type: OpSchema}`` of ai.onnxkit 1, each the ai.onnx definition of :data:`SAME_AS`
    under this domain."""
    from .schemas import definitions as onnx_definitions

    by_key = {(s.domain, s.name, s.since_version): s for s in onnx_definitions()}
    return {op: attrs.evolve(by_key[("", op, v)], domain=FUSED_DOMAIN, since_version=1)
            for op, v in SAME_AS.items()}


def operator_sets() -> list:
    """ai.onnxkit version 1."""
    return [OperatorSet(FUSED_DOMAIN, 1, definitions)]
