"""Output geometry of the sliding-window operators (Conv, ConvTranspose, the pools, Col2Im...).

One function per geometry, over extents ``int | str | None`` (``str`` = a symbolic extent,
``None`` = unknown): the inference functions call them with the static shapes they know,
the kernels with the concrete ones, so the two cannot disagree.  Unknown inputs give
unknown (``None``) results; what is known is checked.

An impossible geometry (attribute lists of the wrong length, a non-positive stride, dilation
or kernel extent, an unknown ``auto_pad``, a window larger than the padded input by more
than a stride) raises :class:`GeometryError`; callers turn it into their own error naming the
node (``ctx.fail``).

The rules (ONNX Conv / pooling definitions):

* explicit pads: ``out = floor((in + begin + end - ((k - 1) * d + 1)) / s) + 1``; a result of
  0 is an empty output (a window one stride too wide), a negative one is an error.  With
  ``ceil_mode`` the count is rounded up, but the last window must start inside the input or
  its begin padding (the rule of PyTorch, which the ONNX pooling vectors follow).
* ``SAME_UPPER`` / ``SAME_LOWER``: ``out = ceil(in / s)``, the total padding
  ``max(0, (out - 1) * s + (k - 1) * d + 1 - in)`` split in halves, the odd one at the end
  (UPPER) or the beginning (LOWER); ``ceil_mode`` has no effect.
* ``VALID``: no padding (``pads`` ignored), the floor rule.
"""

from __future__ import annotations

from typing import Optional, Sequence, Union

Extent = Union[int, str, None]

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


class GeometryError(ValueError):
    """A window geometry the operator's definition does not allow (the message says why)."""


def _known(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _list(values, nd: int, default: int, what: str) -> list:
    out = [default] * nd if not values else [int(v) for v in values]
    if len(out) != nd:
        raise GeometryError(f"{what} must have {nd} values, got {out}")
    return out


def _check_window(nd: int, kernel, strides, dilations):
    """``kernel`` (a list, or None when unknown), strides and dilations checked and filled in."""
    strides = _list(strides, nd, 1, "strides")
    dilations = _list(dilations, nd, 1, "dilations")
    if kernel is not None:
        kernel = list(kernel)
        if len(kernel) != nd:
            raise GeometryError(f"kernel_shape must have {nd} values, got {kernel}")
        if any(_known(k) and k <= 0 for k in kernel):
            raise GeometryError(f"kernel_shape must be positive, got {kernel}")
    if any(s <= 0 for s in strides) or any(d <= 0 for d in dilations):
        raise GeometryError(f"strides and dilations must be positive, got {strides}, {dilations}")
    return kernel, strides, dilations


def _check_auto_pad(auto_pad: Optional[str]) -> str:
    auto_pad = auto_pad or "NOTSET"
    if auto_pad not in AUTO_PADS:
        raise GeometryError(f"unknown auto_pad {auto_pad!r} (one of {', '.join(AUTO_PADS)})")
    return auto_pad


def _half(total: int, upper: bool) -> tuple:
    small, big = total // 2, total - total // 2
    return (small, big) if upper else (big, small)


def window_geometry(in_dims: Sequence[Extent], kernel: Optional[Sequence[Extent]], strides=None, dilations=None,
                    pads=None, auto_pad: Optional[str] = "NOTSET", ceil_mode: bool = False) -> tuple:
    """``(out, begin, end)``: the output extents of a sliding window over spatial extents
    ``in_dims`` and the padding ``begin``/``end`` applied before each axis's first and after
    its last element (lists of ``int``, or ``None`` where unknown).

    ``kernel``: the window extents (None when unknown); ``strides``/``dilations``: default
    ones; ``pads``: ``[b1..bn, e1..en]`` or None (zeros).  Raises :class:`GeometryError`."""
    nd = len(in_dims)
    kernel, strides, dilations = _check_window(nd, kernel, strides, dilations)
    auto_pad = _check_auto_pad(auto_pad)
    out: list = [None] * nd
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begin: list = [None] * nd
        end: list = [None] * nd
        for i, d in enumerate(in_dims):
            if not _known(d):
                continue
            out[i] = -(-d // strides[i])
            if kernel is not None and _known(kernel[i]):
                eff = (kernel[i] - 1) * dilations[i] + 1
                total = max(0, (out[i] - 1) * strides[i] + eff - d)
                begin[i], end[i] = _half(total, auto_pad == "SAME_UPPER")
        return out, begin, end
    if auto_pad == "VALID" or not pads:
        begin, end = [0] * nd, [0] * nd
        ceil_mode = ceil_mode and auto_pad != "VALID"
    else:
        pads = [int(p) for p in pads]
        if len(pads) != 2 * nd:
            raise GeometryError(f"pads must have {2 * nd} values, got {pads}")
        begin, end = pads[:nd], pads[nd:]
    for i, d in enumerate(in_dims):
        if not _known(d) or kernel is None or not _known(kernel[i]):
            continue
        s = strides[i]
        span = d + begin[i] + end[i] - ((kernel[i] - 1) * dilations[i] + 1)
        if ceil_mode:
            o = -(-span // s) + 1
            if (o - 1) * s >= d + begin[i]:
                o -= 1
        else:
            o = span // s + 1
        if o < 0:
            raise GeometryError(f"the window (kernel_shape {list(kernel)}, dilations {dilations}) is larger than "
                                f"the padded input along spatial axis {i} ({d} + {begin[i]} + {end[i]})")
        out[i] = o
    return out, begin, end


def transpose_geometry(in_dims: Sequence[Extent], kernel: Optional[Sequence[Extent]], strides=None, dilations=None,
                       pads=None, auto_pad: Optional[str] = "NOTSET", output_padding=None, output_shape=None) -> tuple:
    """``(output_padding, begin, end, out)`` of a ConvTranspose over spatial extents ``in_dims``.

    The full (uncropped) output along an axis is ``s * (in - 1) + output_padding + (k - 1) * d + 1``;
    ``begin``/``end`` are cropped from it (negative values extend it with zeros).  With
    ``output_shape`` (its last ``n`` values) or ``SAME_*``, the crop is the difference to the
    target split in halves (the odd one at the end for ``SAME_UPPER``, else at the
    beginning); otherwise ``pads`` (``NOTSET``) or nothing (``VALID``).  Raises
    :class:`GeometryError`, also for a negative output extent."""
    nd = len(in_dims)
    kernel, strides, dilations = _check_window(nd, kernel, strides, dilations)
    auto_pad = _check_auto_pad(auto_pad)
    out_pad = _list(output_padding, nd, 0, "output_padding")
    natural: list = [None] * nd
    for i, d in enumerate(in_dims):
        if _known(d) and kernel is not None and _known(kernel[i]):
            natural[i] = strides[i] * (d - 1) + out_pad[i] + (kernel[i] - 1) * dilations[i] + 1
    if output_shape:
        target = [int(v) for v in output_shape][-nd:]
        if len(target) != nd:
            raise GeometryError(f"output_shape must have {nd} spatial values, got {list(output_shape)}")
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        target = [d * s if _known(d) else None for d, s in zip(in_dims, strides)]
    else:
        target = None
    if target is not None:
        begin, end = [None] * nd, [None] * nd
        for i in range(nd):
            if natural[i] is not None and target[i] is not None:
                begin[i], end[i] = _half(natural[i] - target[i], auto_pad == "SAME_UPPER")
        out = list(target)
    else:
        if pads and auto_pad == "NOTSET":
            pads = [int(p) for p in pads]
            if len(pads) != 2 * nd:
                raise GeometryError(f"pads must have {2 * nd} values, got {pads}")
            begin, end = pads[:nd], pads[nd:]
        else:
            begin, end = [0] * nd, [0] * nd
        out = [None if n is None else n - b - e for n, b, e in zip(natural, begin, end)]
    if any(_known(o) and o < 0 for o in out):
        raise GeometryError(f"the output shape {out} would be negative")
    return out_pad, begin, end, out
