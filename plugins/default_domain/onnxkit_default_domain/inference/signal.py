"""Signal and miscellaneous operators: DFT, STFT, Det, NonMaxSuppression, TfIdfVectorizer,
ImageDecoder, BitCast."""

from __future__ import annotations

from onnxkit.plugin import DataType, FunctionTable
from onnxkit.plugin.inference import FLOAT, INT64, dims_of, elem_of, normalize_axis, scalar, tensor

from ._util import definition_keys

FUNCTIONS = FunctionTable(definition_keys)
INT32, UINT8 = int(DataType.INT32), int(DataType.UINT8)


# -- signal, misc ---------------------------------------------------------------------------------

@FUNCTIONS.register("DFT")
def _dft(ctx):
    x = ctx.input_type(0)
    xd = dims_of(x)
    elem = elem_of(x)
    if xd is None:
        return [tensor(elem, None)]
    r = len(xd)
    onesided, inverse = bool(ctx.attr("onesided", 0)), bool(ctx.attr("inverse", 0))
    last = 1 if (onesided and inverse) else 2
    length = None
    if ctx.has_input(1):
        length = scalar(ctx, 1)
        if length is None:
            return [tensor(elem, [None] * (r - 1) + [last])]
        length = int(length)
    axis = None
    if ctx.since_version >= 20:
        if ctx.has_input(2):
            a = scalar(ctx, 2)
            axis = None if a is None else int(a)
        else:
            axis = -2
    else:
        axis = int(ctx.attr("axis", 1))
    if axis is None:
        if not onesided and length is None:
            return [tensor(elem, xd[:-1] + [2])]  # every axis keeps its extent
        return [tensor(elem, [None] * (r - 1) + [last])]
    axis = normalize_axis(ctx, axis, r)
    if axis == r - 1:
        ctx.fail("DFT: the axis cannot be the last one")
    out = list(xd)
    out[-1] = last
    out[axis] = dft_extents(xd[axis], length, inverse, onesided)[1]
    return [tensor(elem, out)]


def dft_extents(dim, length, inverse: bool, onesided: bool):
    """``(n, extent)`` of a DFT along an axis of extent ``dim`` (``int | str | None``): ``n`` the
    transform length (``dft_length`` when given, else ``2 * (dim - 1)`` for a one-sided inverse,
    else ``dim``) and the output's extent on that axis (``n // 2 + 1`` for a one-sided forward
    transform, else ``n``); None where unknown.  Inference and the kernel both use it."""
    if length is None:
        if inverse and onesided:
            length = 2 * (dim - 1) if isinstance(dim, int) else None
        else:
            length = dim
    if onesided and not inverse:
        return length, (length // 2 + 1 if isinstance(length, int) else None)
    return length, length


def stft_extents(signal_length, frame_length, step, onesided: bool):
    """``(frames, bins)`` of an STFT: ``(signal_length - frame_length) // step + 1`` frames and
    ``frame_length // 2 + 1`` (one-sided) or ``frame_length`` bins; None where an extent it needs
    is unknown (``int | str | None``).  Inference and the kernel both use it."""
    known = isinstance(signal_length, int) and isinstance(frame_length, int) and isinstance(step, int)
    frames = (signal_length - frame_length) // step + 1 if known else None
    bins = None
    if isinstance(frame_length, int):
        bins = frame_length // 2 + 1 if onesided else frame_length
    return frames, bins


@FUNCTIONS.register("STFT")
def _stft(ctx):
    x = ctx.input_type(0)
    xd = dims_of(x)
    elem = elem_of(x)
    step = scalar(ctx, 1)
    length = scalar(ctx, 3) if ctx.has_input(3) else None
    if length is None and ctx.has_input(2):
        wd = dims_of(ctx.input_type(2))
        length = wd[0] if wd is not None and len(wd) == 1 and isinstance(wd[0], int) else None
    batch = xd[0] if xd else None
    signal_length = xd[1] if xd is not None and len(xd) >= 2 else None
    frames, bins = stft_extents(signal_length, None if length is None else int(length),
                                None if step is None else int(step), bool(ctx.attr("onesided", 1)))
    return [tensor(elem, [batch, frames, bins, 2])]


@FUNCTIONS.register("Det")
def _det(ctx):
    x = ctx.input_type(0)
    xd = dims_of(x)
    return [tensor(elem_of(x), None if xd is None else xd[:-2])]


@FUNCTIONS.register("NonMaxSuppression")
def _nms(ctx):
    return [tensor(INT64, [None, 3])]


@FUNCTIONS.register("TfIdfVectorizer")
def _tfidf(ctx):
    xd = dims_of(ctx.input_type(0))
    idx = ctx.attr("ngram_indexes")
    n = max(idx) + 1 if idx else None
    if xd is None:
        return [tensor(FLOAT, None)]
    return [tensor(FLOAT, [n] if len(xd) <= 1 else [xd[0], n])]


@FUNCTIONS.register("ImageDecoder")
def _image_decoder(ctx):
    fmt = ctx.attr("pixel_format", "RGB")
    return [tensor(UINT8, [None, None, 1 if fmt == "Grayscale" else 3])]


@FUNCTIONS.register("BitCast")
def _bitcast(ctx):
    from onnxkit.plugin.dtypes import ELEMENT_TYPES

    x = ctx.input_type(0)
    to = int(ctx.attr("to"))
    a, b = ELEMENT_TYPES.get(elem_of(x)), ELEMENT_TYPES.get(to)
    if a is not None and b is not None and a.bits != b.bits:
        ctx.fail(f"BitCast: {a.name} has {a.bits} bits, {b.name} {b.bits}; the widths must be equal")
    return [tensor(to, dims_of(x))]  # the same shape as the input
