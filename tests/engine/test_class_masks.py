"""A signature's shape class through a compiled mask (issue 43; :mod:`onnxkit.runtime.optimizer.class_masks`).

A decoder's signatures differ token by token only in their varying extents; the shape class of a
new one is those extents replaced by their variables.  The compiled mask does it in one
straight-line function for signatures laid out as the first one it met, and hands any other
layout back (``AGAIN``) to the general replacement.  Checked: against a replacement written
here, on random signatures and near misses (another rank, a position fed or not fed, another
length, another dtype), through ShapeClasses, and a decoding stream's classes.
"""

from __future__ import annotations

import numpy as np
from onnxkit.runtime.optimizer import class_masks
from onnxkit.runtime.optimizer.shape_classes import ShapeClasses

F32, I64 = np.dtype(np.float32), np.dtype(np.int64)


def _replace(masks, sig):
    """The class of ``sig``, written out here: varying extents (axes below the rank) by their variables."""
    if any(k >= len(sig) for k, _ in masks):
        return None
    table = {k: dict(axes) for k, axes in masks}
    return tuple(s if s is None or k not in table else
                 (s[0], tuple(table[k].get(a, d) for a, d in enumerate(s[1])))
                 for k, s in enumerate(sig))


def _sig(rng, layout):
    return tuple(None if r is None else (F32 if rng.random() < 0.8 else I64, tuple(int(x) for x in rng.integers(1, 9, r)))
                 for r in layout)


def test_the_compiled_mask_is_the_replacement_or_hands_the_signature_back():
    rng = np.random.default_rng(43)
    for _ in range(200):
        n = int(rng.integers(1, 6))
        layout = [None if rng.random() < 0.2 else int(rng.integers(0, 4)) for _ in range(n)]
        masks = tuple((k, tuple((a, f"v{k}_{a}") for a in sorted(set(int(x) for x in rng.integers(0, 4, 2)))))
                      for k in sorted(set(int(x) for x in rng.integers(0, n + (rng.random() < 0.1), 2))))
        first = _sig(rng, layout)
        mask = class_masks.compiled(masks, first)
        for _ in range(10):
            other = list(layout)
            if rng.random() < 0.3:  # a near miss of the layout
                j = int(rng.integers(len(other) + 1))
                if j == len(other):
                    other.append(1)
                else:
                    other[j] = None if other[j] is not None and rng.random() < 0.5 else int(rng.integers(0, 4))
            sig = _sig(rng, other)
            want = _replace(masks, sig)
            assert class_masks.masked(masks, sig) == want
            got = mask(sig)
            if got is class_masks.AGAIN:
                assert other != layout or any(k >= len(sig) for k, _ in masks)
            else:
                assert got == want, (masks, layout, sig)


def test_rank_zero_and_one_positions_keep_their_tuples():
    masks = ((0, ((0, "a"),)), (1, ((0, "b"),)))
    mask = class_masks.compiled(masks, ((F32, (3,)), (F32, ())))
    assert mask(((F32, (5,)), (F32, ()))) == ((F32, ("a",)), (F32, ()))
    assert mask(((F32, (5, 1)), (F32, ()))) is class_masks.AGAIN


def test_shape_classes_give_one_class_to_a_growing_past():
    classes = ShapeClasses()
    keys = [classes.key(((I64, (1, 1)), (I64, (1, p + 1)), (F32, (1, 2, p, 4)))) for p in range(12)]
    late = set(keys[5:])
    assert len(late) == 1 and classes._mask is not None
    (k,) = late
    assert k[0] == (I64, (1, 1)) and k[1][0] == I64 and k[1][1][0] == 1 and k[1][1][1].startswith("onnxkit_varying")
    assert k[2][0] == F32 and k[2][1][:2] == (1, 2) and k[2][1][2].startswith("onnxkit_varying") and k[2][1][3] == 4
    assert classes.key(((I64, (1, 1)), (I64, (1, 40)), (np.dtype(np.float64), (1, 2, 39, 4)))) != k
    assert classes.key(((I64, (1, 1)), (I64, (1, 40)), (F32, (1, 2, 39, 5)))) != k
    assert classes.key(((I64, (1, 1)), (I64, (1, 40)), (F32, (1, 2, 39, 4)))) == k


def test_a_signature_laid_out_otherwise_is_masked_by_the_general_replacement():
    classes = ShapeClasses()
    for p in range(8):
        classes.key(((I64, (1, 1)), (I64, (1, p + 1)), (F32, (1, 2, p, 4))))
    masks = classes._masks
    for sig in (((I64, (1, 1)), (I64, (1, 9)), None), ((I64, (1, 1)), (I64, (1, 9)), (F32, (2, 8, 4))),
                ((I64, (1, 1)), (I64, (1, 9)), (F32, (1, 2, 8, 4)), (F32, (3,))), ((I64, (1, 1)),)):
        assert classes._masked(sig) == _replace(masks, sig)
