"""The reduced-precision element types of the plugin surface (Clause 6.3): codes, packing and
conversion, vectorised with numpy.

* :func:`to_codes` / :func:`from_codes`: an array of a type of width ``w <= 8`` bits as its
  ``w``-bit patterns in ``uint8`` (two's complement for the narrow integers), and back.
* :func:`pack_bits` / :func:`unpack_bits` / :func:`packed_size`: raw storage (6.3.4), the codes
  as a little-endian bit stream.
* :func:`pack_typed` / :func:`unpack_typed` / :func:`typed_count` / :data:`TYPED_PER_INT32`:
  typed storage (6.3.4, Table 7), codes carried by 32-bit integers.
* :func:`convert`: values converted to any element type with the rounding of 6.3.2 / 6.3.3
  (round to nearest, ties to even; ``saturate`` for the float8 types); :func:`integer_range`:
  the ``(lo, hi)`` an integer element type holds.
"""

from __future__ import annotations

from ..narrow import (TYPED_PER_INT32, convert, from_codes, integer_range, pack_bits, pack_typed, packed_size, to_codes,
                      typed_count, unpack_bits, unpack_typed)

__all__ = ["TYPED_PER_INT32", "convert", "from_codes", "integer_range", "pack_bits", "pack_typed", "packed_size",
           "to_codes", "typed_count", "unpack_bits", "unpack_typed"]
