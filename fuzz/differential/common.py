"""Small choices every model family makes: element types, shapes, constants and near misses."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto as TP

from .build import NP, Builder

#: symbolic extents (first run, second run): 0 and 1 among them
EXTENTS = ((2, 3), (1, 0), (3, 1), (0, 2), (2, 1), (1, 2), (3, 3))


def pick(b: Builder, options, p=None):
    """One of ``options`` (a list), with probabilities ``p``."""
    k = int(b.rng.choice(len(options), p=p))
    return options[k]


def chance(b: Builder, p: float) -> bool:
    return bool(b.rng.random() < p)


def float_type(b: Builder) -> int:
    return pick(b, [TP.FLOAT, TP.DOUBLE, TP.FLOAT16], [0.6, 0.25, 0.15])


def shape(b: Builder, rank: int, symbolic: float = 0.5, fixed=(1, 2, 3), zero_ok: bool = True) -> list:
    """A shape of ``rank`` dims: some symbolic (two extents, 0 and 1 among them), others fixed."""
    out = []
    for _ in range(rank):
        if chance(b, symbolic):
            e = pick(b, list(EXTENTS)) if zero_ok else pick(b, [(2, 3), (3, 1), (2, 1), (1, 2), (3, 3)])
            out.append(b.dim(e))
        else:
            out.append(int(pick(b, list(fixed))))
    return out


def value_spec(b: Builder, elem: int, special: float = 0.2) -> dict:
    if elem in (TP.FLOAT, TP.DOUBLE, TP.FLOAT16):
        return {"kind": "f", "lo": -3.0, "hi": 3.0, "special": chance(b, special)}
    if elem == TP.BOOL:
        return {"kind": "b"}
    return {"kind": "i", "lo": -5, "hi": 5}


def scalar(b: Builder, target: float, elem: int, tag: str, miss: float = 0.12) -> str:
    """A one-element constant equal to ``target``; near misses (noted in the tags): the value
    off by 1e-3 (relative), the shape [1,1,1,1,1] (rank 5: broadcasting raises the rank), or
    as [1] / [] (legal either way)."""
    value = target
    shp: tuple = pick(b, [(), (1,)])
    if chance(b, miss):
        value = target * (1 + pick(b, [1e-3, -1e-3, 1e-2])) if target else 1e-3
        b.tags.append(f"{tag}:value")
    if chance(b, miss):
        shp = (1, 1, 1, 1, 1)
        b.tags.append(f"{tag}:rank5")
    elif chance(b, 0.05):
        shp = (1, 1)
    return b.const(np.full(shp, value, dtype=NP[elem]))


def binary(b: Builder, op: str, a: str, c: str, swap: bool = None) -> str:
    """``op(a, c)`` or ``op(c, a)`` (commutative ops: either operand order)."""
    if swap is None:
        swap = chance(b, 0.5)
    return b.node(op, [c, a] if swap else [a, c])


def leak(b: Builder, names: list, tag: str, p: float = 0.1) -> None:
    """Near miss: one intermediate of a pattern also read elsewhere (a graph output, or another node's
    input that is then a graph output)."""
    if names and chance(b, p):
        v = pick(b, list(names))
        if chance(b, 0.5):
            b.output(v)
        else:
            b.output(b.node("Identity", [v]))
        b.tags.append(f"{tag}:leak")


def source(b: Builder, elem: int, shp: list, special: float = 0.2) -> str:
    """The pattern's input: a graph input, sometimes computed (an Abs or Neg of one, or an Add)."""
    x = b.input(elem, shp, value_spec(b, elem, special))
    r = b.rng.random()
    if r < 0.15:
        return b.node("Neg", [x])
    if r < 0.25:
        return b.node("Add", [x, x])
    return x
