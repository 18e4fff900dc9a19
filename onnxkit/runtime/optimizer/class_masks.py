"""A signature's shape class read off its varying extents (:class:`~.specialize.ShapeClasses`).

A *mask table* is ``((input position, ((axis, variable), ...)), ...)``: per input position
with an axis that varies, those axes and their dimension variables, in position order.
:func:`masked` replaces, in a signature (per input position ``(dtype, shape)`` or None), each
varying extent by its variable — an axis past the shape's rank is left alone, a position not fed
stays None — and gives None where a masked position is past the signature's end.
:func:`compiled` makes the same replacement one straight-line function for the signatures laid
out as one given signature (its length, which positions are fed, their ranks): a decoder's
next signature differs from its last only in the varying extents.  The function answers
:data:`AGAIN` for a signature laid out otherwise; :func:`masked` then answers.
"""

from __future__ import annotations

from typing import Callable, Optional

__all__ = ["AGAIN", "compiled", "masked"]

#: what a compiled mask answers for a signature laid out otherwise than the one it was made for
AGAIN = object()


def masked(masks: tuple, sig: tuple) -> Optional[tuple]:
    """``sig`` with each varying extent of the mask table ``masks`` replaced by its variable;
    None where a masked position is past the signature's end."""
    out = list(sig)
    n = len(out)
    for k, axes in masks:
        if k >= n:
            return None
        s = out[k]
        if s is None:
            continue
        shape = list(s[1])
        rank = len(shape)
        for a, name in axes:
            if a < rank:
                shape[a] = name
        out[k] = (s[0], tuple(shape))
    return tuple(out)


def compiled(masks: tuple, sig: tuple) -> Callable:
    """What :func:`masked` gives for ``masks``, as one function of signatures laid out as
    ``sig`` (the same length; the same positions fed, at the same ranks); :data:`AGAIN` for
    any other signature."""
    n = len(sig)
    if any(k >= n for k, _ in masks):
        return lambda s: AGAIN
    consts: dict = {"AGAIN": AGAIN}
    code = ["def mask(sig):", f"    if len(sig) != {n}:", "        return AGAIN"]
    parts = [f"sig[{j}]" for j in range(n)]
    for k, axes in masks:
        s = sig[k]
        code.append(f"    s{k} = sig[{k}]")
        if s is None:
            code += [f"    if s{k} is not None:", "        return AGAIN"]
            continue
        rank = len(s[1])
        by_axis = {a: name for a, name in axes if a < rank}
        code += [f"    if s{k} is None:", "        return AGAIN", f"    h = s{k}[1]",
                 f"    if len(h) != {rank}:", "        return AGAIN"]
        dims = []
        for a in range(rank):
            if a in by_axis:
                consts[f"_v{k}_{a}"] = by_axis[a]
                dims.append(f"_v{k}_{a}")
            else:
                dims.append(f"h[{a}]")
        code.append(f"    s{k} = (s{k}[0], ({', '.join(dims)}{',' if rank == 1 else ''}))")
        parts[k] = f"s{k}"
    code.append(f"    return ({', '.join(parts)}{',' if n == 1 else ''})")
    scope = dict(consts)
    exec(compile("\n".join(code) + "\n", "<onnxkit shape class mask>", "exec"), scope)
    return scope["mask"]
