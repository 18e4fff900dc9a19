"""Broadcasting (Clause 6.6) over shapes whose extents may be dimension variables or unknown.

An extent is an ``int``, a ``str`` (a dimension variable, 6.5.2) or ``None`` (unknown).
Both senses are here: multidirectional (6.6.2) and unidirectional (6.6.3).

The dimension-variable rule (6.6.4): a variable equals another extent only where that is
the same variable, and is not known to be 1.  So at one position:

=====================  ===========  =========================================================
extents                result       why
=====================  ===========  =========================================================
3, 3 / N, N            3 / N        equal
1, 3 / 1, N            3 / N        1 stretches
N, 3                   3            if the model is valid N is 1 or 3: either way 3 (not provable)
N, M                   unknown      could be N or M: never equated (9.3)
unknown, 3             3            as N, 3
unknown, 1 / N         unknown
3, 4                   error        two static extents, neither 1: :class:`BroadcastError`
=====================  ===========  =========================================================

:class:`Broadcast` reports the result and whether it holds without appeal to the value of
any variable or unknown (``provable``), which the checker uses for warnings.
"""

from __future__ import annotations

from typing import Iterable, Optional, Sequence, Union

from onnxkit import records
from onnxkit import record_methods

from .errors import OnnxkitTypeError

Extent = Union[int, str, None]


class BroadcastError(OnnxkitTypeError):
    """Shapes that cannot broadcast whatever the values of their variables (two static extents)."""


@records.frozen
class Broadcast:
    """The broadcast shape, and whether it holds without assumptions about variables (6.6.4)."""

    shape: tuple
    provable: bool
    __repr__, __eq__, __hash__ = record_methods.REPR, record_methods.EQ, record_methods.HASH


def _extent(d) -> Extent:
    if d is None or isinstance(d, (int, str)):
        return d
    value = getattr(d, "value", d)  # an ir.Dim
    return value


def _position(extents: Sequence[Extent]) -> tuple[Extent, bool]:
    """The result extent at one position and whether it is provable; raises on a static clash."""
    statics = {e for e in extents if isinstance(e, int)}
    big = statics - {1}
    if len(big) > 1:
        raise BroadcastError(f"extents {sorted(big)} cannot broadcast (Clause 6.6.2)")
    others = [e for e in extents if not isinstance(e, int)]
    if big:
        (n,) = big
        # every variable or unknown here must be 1 or n; the result is n either way
        return n, not others
    names = {e for e in others if isinstance(e, str)}
    unknown = any(e is None for e in others)
    if not others:
        return 1, True
    if len(names) == 1 and not unknown:
        return next(iter(names)), True  # N with N, or N with 1
    return None, False


def broadcast_multidirectional(shapes: Iterable[Sequence]) -> Broadcast:
    """Multidirectional broadcasting (6.6.2) of shapes of known rank."""
    shapes = [tuple(_extent(d) for d in s) for s in shapes]
    rank = max((len(s) for s in shapes), default=0)
    padded = [(1,) * (rank - len(s)) + s for s in shapes]
    out, provable = [], True
    for i in range(rank):
        try:
            e, ok = _position([s[i] for s in padded])
        except BroadcastError as exc:
            raise BroadcastError(f"shapes {[list(s) for s in shapes]} do not broadcast at axis {i}: {exc}") from None
        out.append(e)
        provable &= ok
    return Broadcast(tuple(out), provable)


def broadcast_unidirectional(target: Sequence, source: Sequence) -> Broadcast:
    """Unidirectional broadcasting (6.6.3) of ``source`` to ``target``; the result is ``target``'s shape."""
    a = tuple(_extent(d) for d in target)
    b = tuple(_extent(d) for d in source)
    if len(b) > len(a):
        raise BroadcastError(f"shape {list(b)} has a higher rank than {list(a)}: cannot broadcast to it (6.6.3)")
    b = (1,) * (len(a) - len(b)) + b
    provable = True
    for i, (x, y) in enumerate(zip(a, b)):
        if y == 1 or (x == y and x is not None):
            continue
        if isinstance(x, int) and isinstance(y, int):
            raise BroadcastError(f"shape {list(source)} does not broadcast to {list(target)} at axis {i} (6.6.3)")
        provable = False
    return Broadcast(a, provable)


def broadcast_shape(*shapes: Sequence) -> tuple:
    """Shorthand: the multidirectional result shape (raises :class:`BroadcastError` on a clash)."""
    return broadcast_multidirectional(shapes).shape


def static_size(shape: Sequence[Extent]) -> Optional[int]:
    """The element count of a static shape, or None if any extent is not an integer."""
    n = 1
    for d in shape:
        if not isinstance(d, int):
            return None
        n *= d
    return n
