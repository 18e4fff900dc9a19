"""Portable kernels of com.microsoft, one module per operator family (array API: ``ctx.xp``).

``fused.py`` (FusedConv, FusedGemm, FusedMatMul, BiasAdd, BiasGelu, FastGelu, Gelu, QuickGelu,
BiasSoftmax), ``norm.py`` (SkipLayerNormalization, SkipSimplifiedLayerNormalization,
EmbedLayerNormalization), ``attention.py`` (Attention, MultiHeadAttention, RotaryEmbedding),
``gqa.py`` (GroupQueryAttention), ``nbits.py`` (MatMulNBits), ``text.py`` (Tokenizer, MurmurHash3: numpy,
``host_only``), ``distance.py`` (CDist) and ``quantized.py`` (QLinearAdd, QLinearMul, QLinearGlobalAveragePool,
QGemm), ``qlinear_ops.py`` (QuantizeLinear, DequantizeLinear, DynamicQuantizeMatMul,
MatMulIntegerToFloat, QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax, QLinearConcat, QLinearWhere,
QLinearAveragePool), ``qlstm.py`` (DynamicQuantizeLSTM), ``qconv.py`` (QLinearConv), ``qattention.py`` (QAttention),
``simplified_norm.py`` (the ai.onnx extension SimplifiedLayerNormalization, key ``('', op, 1)``).
Each exposes ``KERNELS``, an :class:`onnxkit.plugin.KernelTable` keyed by
``("com.microsoft", op_type, 1)`` (the extension: ``("", op_type, 1)``); :func:`all_kernels` merges them (modules whose name starts
with ``_`` hold shared helpers).
"""

from __future__ import annotations

from onnxkit.plugin import lazy_family_tables


def all_kernels() -> dict:
    """Every kernel of every family module of this package, each imported when a node is first
    planned with it (the generated ``_kernel_index.py``; tests/plugins/test_kernel_index.py keeps it equal
    to the modules' ``KERNELS``: regenerate with ``python tools/kernel_index.py``)."""
    from ._kernel_index import ENTRIES

    return lazy_family_tables(__name__, ENTRIES)
