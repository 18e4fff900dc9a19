"""cpu fast path of MatMulNBits (com.microsoft 1) for a decoder's token step: 4-bit weights at
accuracy_level 4, a few rows of float32 A (``onnxkit_microsoft/kernels/nbits.py`` stays the
reference and serves everything else).

Where the node's B and scales (and packed uint8 zero points, if any) are constants of the plan,
``bits`` is 4, ``block_size`` at most 256 with K a whole number of blocks, no ``g_idx`` and
``accuracy_level`` 4 (the portable kernel's int8 path: A quantized per block to int8), a run
with a float32 numpy A of at most :data:`ROWS_MAX` rows (``prod(A.shape[:-1])``) calls the
compiled loop :data:`onnxkit_cpu.compiled.nbits.int4_rows` on the packed weights themselves:
the weight is read as its 4-bit values (N·K/2 bytes a product, where the portable kernel's
dequantized float32 weight is N·K·4), each block's int8 × int4 dot product exact, as
onnxruntime's CPU kernel computes it.  The bias, if any, is added in float32 after.  Results
equal the portable kernel's to float32 rounding (its float32 BLAS product of the same
dequantized values sums in another order).  More rows (a prompt) take the portable kernel: its
one BLAS product over the dequantized weight, made once, is faster there.  On a cold first run
the compiled loop is deferred (:mod:`onnxkit_cpu.compiled`); the portable kernel serves.

Where onnxkit-microsoft is not installed this module registers nothing.
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import KernelTable, declares_output_bytes, traits_of

from ..compiled import nbits as loops

KERNELS = KernelTable()

try:
    from onnxkit_microsoft.api import nbits as portable
except ImportError:  # onnxkit-microsoft absent: no com.microsoft operators to serve
    portable = None

DOMAIN = "com.microsoft"
#: the most rows of A the compiled loop takes (a decoder's token step has one per sequence)
ROWS_MAX = 8


def _packed(ctx, n: int, k: int, block: int):
    """(B (N, KB, blob) uint8, scales (N, KB) float32, zero points (N, KB) int32) of the node's
    constants, or None where they are not constants of the accepted form."""
    if not (ctx.is_constant(1) and ctx.is_constant(2)) or ctx.num_inputs > 4 and ctx.node.input[4]:
        return None
    b, scales = ctx.constant(1), ctx.constant(2)
    kb = k // block
    if type(b) is not np.ndarray or b.dtype != np.uint8 or b.shape != (n, kb, block // 2) \
            or type(scales) is not np.ndarray or scales.size != n * kb or scales.dtype.kind != "f":
        return None
    zp = np.full((n, kb), 8, np.int32)
    if ctx.num_inputs > 3 and ctx.node.input[3]:
        z = ctx.constant(3)
        width = -(-kb * 4 // 8)
        if not ctx.is_constant(3) or type(z) is not np.ndarray or z.dtype != np.uint8 or z.size != n * width:
            return None
        zp = portable.unpack(z.reshape(n, width), 4)[:, :kb].astype(np.int32)
    return (b, np.ascontiguousarray(b), np.ascontiguousarray(scales.reshape(n, kb), np.float32), zp,
            ctx.constant(3) if ctx.num_inputs > 3 and ctx.node.input[3] else None)


if portable is not None:

    @KERNELS.register("MatMulNBits", 1, domain=DOMAIN)
    def matmul_nbits(ctx):
        base = portable.matmul_nbits(ctx)
        n, k = int(ctx.attr("N")), int(ctx.attr("K"))
        bits, block = int(ctx.attr("bits")), int(ctx.attr("block_size"))
        if bits != 4 or int(ctx.attr("accuracy_level") or 0) != 4 or portable.int8_block(bits, block) != block \
                or k % block or not k:
            return base
        packed = _packed(ctx, n, k, block)
        if packed is None:
            return base
        loop = loops.int4_rows.get()
        if loop is None:
            return base
        b0, b, scales0, zp, z0 = packed
        s0 = ctx.constant(2)

        def run(a, b_in, scales, zero_points=None, g_idx=None, bias=None):
            if type(a) is np.ndarray and a.dtype == np.float32 and b_in is b0 and scales is s0 \
                    and zero_points is z0 and g_idx is None and a.ndim >= 1 and a.shape[-1] == k:
                rows = a.size // k
                if rows <= ROWS_MAX:
                    out = np.empty((rows, n), np.float32)
                    loop(np.ascontiguousarray(a.reshape(rows, k)), b, scales0, zp, out)
                    if bias is not None:
                        out = out + bias.astype(np.float32, copy=False)
                    return out.reshape(a.shape[:-1] + (n,))
            return base(a, b_in, scales, zero_points, g_idx, bias)

        return declares_output_bytes(run, traits_of(base).output_bytes)
