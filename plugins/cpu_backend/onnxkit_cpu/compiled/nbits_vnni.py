"""MatMulNBits' 4-bit product on AVX-512 VNNI (overrides/nbits.py): the same sums as
:mod:`.nbits`'s ``int4_product``, with the block dot products taken four multiply-adds at a time
by ``vpdpbusd`` (:mod:`.nbits_vnni_impl`) where the host has the instruction.

**What is computed.**  A is quantized per row and block as onnxruntime's CPU kernel quantizes it
(:mod:`.nbits`: ``q = round_half_even(a * 127 / amax)``, int8, columns past K zeros), then
``out[m, n] = sum over blocks of (dot_b - zp_nb * qsum_b) * (sa_b * scale_nb)`` with
``dot_b = sum_k w_nk q_k`` over the block: ``vpdpbusd`` multiplies the unsigned 4-bit weight
values (0..15, as u8) by the signed int8 ``q`` and sums four products into an int32 lane,
exactly; ``|dot_b| <= 15 * 127 * 256 < 2^24``, so its float32 value is exact and every result
equals ``int4_product``'s bit for bit (the float32 epilogue is the same expression in the same
order).

**Layout** (:func:`layout`, as many bytes as B): ``(NT, K8, NV, 16, 4)`` uint8 for
``NT = ceil(N / TILE)`` tiles of :data:`TILE` columns, ``K8 = KB * block / 8`` groups of eight
k, ``NV = TILE / 16`` vectors of 16 columns: byte ``(t, g, v, c, j)`` holds in its low nibble
the value of column ``t TILE + 16 v + c`` at ``k = 8 g + j`` and in its high nibble the one at
``k = 8 g + 4 + j`` (columns past N, and k past K, zeros).  One 64-byte load gives two
``vpdpbusd`` operands (the low nibbles, and the high nibbles shifted down), each against four
int8 values of A broadcast.  Scales and zero points as :mod:`.nbits`'s tiled layout.

**When.**  :func:`get` returns the implementation where compiled loops are on (and not deferred
by a cold plan, :mod:`onnxkit_cpu.compiled`), numba's host reports ``avx512vnni`` and
:data:`ENABLED` is true (tests switch it to compare the paths); else None, and the override
keeps ``int4_product``.
"""

from __future__ import annotations

import numpy as np

from onnxkit_cpu.compiled import host, kernel

#: output columns of a tile (four 16-lane vectors)
TILE = 64
#: False: :func:`get` returns None (the portable float loop runs); for tests and A/B runs
ENABLED = True


def _probe():  # the compiled-loop gate of :mod:`onnxkit_cpu.compiled` (deferral, switches)
    return 0


_PROBE = kernel(_probe)


def host_has_vnni() -> bool:
    """Whether numba targets this host and it has AVX-512 VNNI (:func:`.host.has`)."""
    return host.has("avx512vnni")


def get():
    """The implementation module (:mod:`.nbits_vnni_impl`), or None (module docstring)."""
    if not ENABLED or _PROBE.get() is None or not host_has_vnni():
        return None
    from . import nbits_vnni_impl

    return nbits_vnni_impl


def layout(b: np.ndarray, n: int, block: int) -> np.ndarray:
    """B ``(N, KB, block / 2)`` uint8 (two 4-bit values a byte, the even k low) in the layout of
    the module docstring."""
    kb = b.shape[1]
    nt, nv = -(-n // TILE), TILE // 16
    kpad = kb * block
    q = np.zeros((nt * TILE, kpad), np.uint8)
    flat = b.reshape(n, kpad // 2)
    q[:n, 0::2] = flat & 15
    q[:n, 1::2] = flat >> 4
    q8 = q.reshape(nt, nv, 16, kpad // 8, 8)
    packed = q8[..., :4] | (q8[..., 4:] << 4)
    return np.ascontiguousarray(packed.transpose(0, 3, 1, 2, 4))
