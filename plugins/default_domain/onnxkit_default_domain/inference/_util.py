"""What the family modules share: the keys of the definitions their functions serve
(:class:`onnxkit.plugin.FunctionTable` finds each operator's since_versions there)."""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1)
def definition_keys() -> tuple:
    """``(domain, op_type, since_version)`` of every definition this package serves: ai.onnx's
    and the preview domains' (the schema data's keys alone: no definition is built) and
    ai.onnxkit's (:mod:`..fused`: versions 1 to 4)."""
    from ..fused import FUSED_DOMAIN, SAME_AS
    from ..schemas import schema_data

    return (*schema_data().keys, *((FUSED_DOMAIN, op, 1) for op in SAME_AS), (FUSED_DOMAIN, "Attention", 2),
            (FUSED_DOMAIN, "LookupTable", 3), (FUSED_DOMAIN, "Elementwise", 4))
