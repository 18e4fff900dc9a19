"""float32 logistic (sigmoid) and tanh as onnxruntime's CPU kernels compute them, any array namespace.

onnxruntime's recurrent kernels (its LSTM, and the DynamicQuantizeLSTM built on it) evaluate
their gates with MLAS's rational approximations; where the result is quantized afterwards
(DynamicQuantizeLSTM quantizes every step's hidden state) a last-place difference can move a
value across a rounding boundary, so the kernel reproduces them.  The implementation is the
default domain's, shared with the cpu backend's Sigmoid and Tanh
(``onnxkit_default_domain.api.mlas_logistic`` / ``mlas_tanh``: the sequence, its rounding and
its NaN behaviour are stated there); this module names it for the kernels here.
"""

from __future__ import annotations

from onnxkit_default_domain.api import mlas_logistic as logistic
from onnxkit_default_domain.api import mlas_tanh as tanh

__all__ = ["logistic", "tanh"]
