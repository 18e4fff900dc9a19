"""What other plugins may import from onnxkit-microsoft: its published building blocks.

A backend that specializes com.microsoft kernels (onnxkit-cpu's quantized fast paths) builds on
the portable kernels it replaces: it falls back to them where its fast path does not apply and
reuses their attribute parsing and checks, so that it fails where they fail and with the same
message.  Another plugin imports from ``onnxkit_microsoft.api`` and from nothing else of this
package (tests/plugins/test_plugin_surface.py fails otherwise); every other module, and every
``_``-prefixed name, is private and may change with the package.

Published, as modules (their public names are the factories registered in their ``KERNELS``
tables and the helpers those factories are made of; a backend may call them, never patch them):

* :mod:`qlinear_ops` — QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax,
  QLinearConcat, QLinearAveragePool, QLinearGlobalAveragePool, QLinearWhere;
* :mod:`quantized` — QGemm, MatMulIntegerToFloat, DynamicQuantizeMatMul and the per-column
  parameter helpers they share;
* :mod:`nbits` — MatMulNBits (with ``unpack`` and ``int8_block``);
* :mod:`gqa` — GroupQueryAttention (with ``attributes``) and :mod:`gqa_token`, its decoding
  step (``applies``, ``case``, ``token_step``, ``ENABLED``);
* :mod:`norm` — the skip normalizations (with ``host_f32``, ``skip_norm_bytes``) and
  :mod:`simplified_norm` — SimplifiedLayerNormalization.
"""

from __future__ import annotations

from .kernels import gqa, gqa_token, nbits, norm, qlinear_ops, quantized, simplified_norm

__all__ = ["gqa", "gqa_token", "nbits", "norm", "qlinear_ops", "quantized", "simplified_norm"]
