"""What the family modules share: the domain and the keys of the definitions their functions
serve (:class:`onnxkit.plugin.FunctionTable` finds each operator's since_versions there)."""

from __future__ import annotations

from functools import lru_cache

DOMAIN = "com.microsoft"


@lru_cache(maxsize=1)
def definition_keys() -> tuple:
    """``(domain, op_type, since_version)`` of every definition this package ships: com.microsoft's
    and the extension's (ai.onnx SimplifiedLayerNormalization-1)."""
    from ..schemas import schema_data

    return tuple(schema_data().keys)
