"""The com.microsoft and com.microsoft.nchwc definitions (operator set 1 each), read from the
generated ``schemas_data.json.gz``.

The data (with the few extension definitions of other domains, :func:`extension_operators`)
is produced by ``plugins/microsoft_domain/tools/generate_schemas.py`` from onnxruntime's
operator registry at build time, for the operators this package implements; nothing here imports
``onnxruntime`` or ``onnx``.  It is read once per process, on first use.
"""

from __future__ import annotations

from onnxkit.plugin import SchemaData, packaged_schema_data

#: The domain this package defines, and onnxruntime's NCHWc layout domain, which it also provides.
DOMAIN = "com.microsoft"
NCHWC_DOMAIN = "com.microsoft.nchwc"


def schema_data() -> SchemaData:
    """All definitions and the domain's version range (read once, then cached)."""
    return packaged_schema_data(__package__)


def definitions() -> tuple:
    """Every com.microsoft definition (one :class:`~onnxkit.schema.OpSchema` per (domain, name,
    since_version))."""
    data = schema_data()
    return tuple(data.definition(k) for k in data.keys if k[0] == DOMAIN)


def extension_operators() -> tuple:
    """The definitions of other domains' operators onnxruntime registers there and this package
    adds as extensions (``onnxkit_extension_operators``): ai.onnx SimplifiedLayerNormalization-1
    and LayerNormalization-1 (bound below ai.onnx 17, where ai.onnx's own begins)."""
    data = schema_data()
    return tuple(data.definition(k) for k in data.keys if k[0] not in data.versions)


def operator_sets() -> list:
    """One :class:`~onnxkit.schema.OperatorSet` per (domain, version) of the data."""
    return schema_data().operator_sets()
