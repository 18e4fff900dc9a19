"""Fold a zero-valued constant Pad of the spatial axes into the Conv that reads it.

``Conv(Pad(X, pads, 0), W, B)`` with pads on the spatial axes only is ``Conv(X, W, B)`` with
those pads added to the Conv's own: a convolution's ``pads`` attribute pads X with zeros
(Part 2, Conv), so both read the same values at the same window positions and the output
shape is the same (``floor((d + begin + end - dilated kernel) / stride) + 1`` either way).
Exporters write the explicit Pad for "same" padding computed ahead (TensorFlow-style models,
transformers' MobileNet and EfficientNet); onnxruntime folds it (its ``PadFusion``).  The
result is equal up to rounding: the padded zeros contribute ``w * 0`` terms either way, but the
Conv may take another body for the new pads (another summation order), within the Conv's
tolerance (:mod:`onnxkit.tolerances`); a +0.0 pad value only (a -0.0 could flip the sign of an
all-padding window's zero).

What must hold (anything else is left as it is):

* Pad is ai.onnx Pad-2 or later (Pad-1 names its attribute ``paddings``), mode ``constant``;
  its pads (the attribute, Pad-2; an int64 input, Pad-11 on, constant or computed from constants
  by shape arithmetic, :mod:`.computed`, as torch's exporter writes it) are non-negative and zero
  on the batch and channel axes (the first two); its value (the attribute, or the optional
  input: absent, or a one-element constant) is +0.0; no ``axes`` input (Pad-18);
* its output is read by the Conv alone, as X (:mod:`.rules`: no other node, no subgraph, not a
  graph output);
* the Conv's ``auto_pad`` is ``NOTSET`` (explicit pads, then added to) or ``VALID`` (none: the
  folded Conv has the Pad's as explicit pads), and its pads, if any, have one begin and one end
  per spatial axis of the Pad's rank.

Every constant the fold depends on is noted with ``read_constant`` (an IR < 4 override of one
runs the model as given).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from onnxkit import records

from ... import ir
from .computed import computed_constant
from .rules import Rule, Var, op, rules_pass
from .view import GraphView


def text(value) -> str:
    """A string attribute's value as ``str`` (bytes decoded)."""
    return value.decode() if isinstance(value, bytes) else str(value)


def _pad_amounts(view: GraphView, pad) -> Optional[list]:
    """The Pad's pads as a list of ints where they are known constants, else None."""
    if view.version("") < 11:
        pads = pad.attr("pads")
        return None if pads is None else [int(p) for p in pads]
    if len(pad.input) < 2 or not pad.input[1]:
        return None
    found = computed_constant(view, pad.input[1])
    if found is None or found[0].dtype != np.int64 or found[0].ndim != 1:
        return None
    return [int(p) for p in found[0]]


def _zero_value(view: GraphView, pad) -> bool:
    """True if the Pad's constant value is +0.0 (the default where none is given)."""
    if view.version("") < 11:
        value = float(pad.attr("value", 0.0))
        return value == 0.0 and not np.signbit(value)
    if len(pad.input) < 3 or not pad.input[2]:
        return True
    found = computed_constant(view, pad.input[2])
    value = None if found is None else found[0]
    return value is not None and value.size == 1 and bool(value.reshape(()) == 0) \
        and not bool(np.signbit(value.reshape(())))


def _spatial_pads(view: GraphView, match) -> Optional[tuple]:
    """``(begins, ends)`` the Pad adds on the spatial axes where the fold holds (module
    docstring), else None."""
    pad, conv = match["pad"], match.root
    if view.version("") < 2 or text(pad.attr("mode", "constant")) != "constant" or len(pad.input) > 3 \
            or len(pad.output) != 1 or not _zero_value(view, pad):
        return None
    return spatial_pads(view, pad, conv)


def spatial_pads(view: GraphView, pad, conv) -> Optional[tuple]:
    """``(begins, ends)``: the pads ``pad`` adds on the spatial axes, where they can join the pads
    of ``conv`` (a Conv-like node reading its output): known non-negative constants of a rank of 3
    or more, none on the batch and channel axes, ``conv`` with ``auto_pad`` NOTSET or VALID and
    its own pads (if any) of the same spatial rank; else None.  The caller checks the Pad's mode
    and value."""
    pads = _pad_amounts(view, pad)
    if pads is None or len(pads) % 2 or len(pads) < 6 or any(p < 0 for p in pads):
        return None
    rank = len(pads) // 2
    if pads[0] or pads[1] or pads[rank] or pads[rank + 1]:
        return None
    if text(conv.attr("auto_pad", "NOTSET")) not in ("NOTSET", "VALID"):   # VALID: no pads of its own
        return None
    own = conv.attr("pads")
    if own is not None and len(own) != 2 * (rank - 2):
        return None
    return pads[2:rank], pads[rank + 2:]


def _fold(view: GraphView, match) -> None:
    pad, conv = match["pad"], match.root
    begins, ends = _spatial_pads(view, match)
    for name in pad.input[1:]:
        if name:
            for read in {name} | computed_constant(view, name)[1]:
                view.read_constant(read)
    fold_pads(view, pad, conv, begins, ends)


def fold_pads(view: GraphView, pad, conv, begins, ends) -> None:
    """Replace ``conv`` (a Conv-like node with ``pads`` / ``auto_pad`` NOTSET or VALID) by itself
    reading ``pad``'s input with ``begins`` / ``ends`` (the spatial axes' pads, in order) added to
    its own pads, and remove ``pad`` (the caller has checked the fold is exact)."""
    spatial = len(begins)
    own = [int(p) for p in (conv.attr("pads") or [0] * (2 * spatial))]
    pads = [own[i] + begins[i] for i in range(spatial)] + [own[spatial + i] + ends[i] for i in range(spatial)]
    attribute = [a for a in conv.attribute if a.name not in ("pads", "auto_pad")] + [ir.Attribute.make("pads", pads)]
    view.replace(conv, records.evolve(conv, input=[pad.input[0]] + list(conv.input[1:]), attribute=attribute))
    view.remove(pad)


RULES = (Rule("pad_conv", op.Conv(op.Pad(Var("x"), bind="pad", variadic=True), Var("w"), variadic=True),
              _fold, lambda view, match: _spatial_pads(view, match) is not None),)
run = rules_pass(RULES)
