"""When two results agree: the comparison the oracle and the exclusions share (a leaf module:
it imports nothing of the fuzzer)."""

from __future__ import annotations

from typing import Optional

import numpy as np

#: (rtol, atol per unit of the expected values' largest magnitude) by dtype
TOLERANCE = {np.dtype(np.float64): (1e-7, 1e-9), np.dtype(np.float32): (1e-4, 1e-5),
             np.dtype(np.float16): (4e-3, 4e-3)}


def agreement(got, want, loose: bool = False):
    """``(problem, ok)``: ``problem`` a line when shape or dtype differ (``ok`` None), else None and
    ``ok`` the flat mask of elements of ``got`` matching ``want`` (within :data:`TOLERANCE`, NaN
    for NaN, infinities exactly; ``loose``: float32's tolerance)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return f"shape {got.shape} != {want.shape}", None
    if got.dtype != want.dtype:
        return f"dtype {got.dtype} != {want.dtype}", None
    if want.dtype.kind not in "fc":
        if want.dtype.kind == "O":
            return None, np.array([a == b for a, b in zip(got.reshape(-1).tolist(), want.reshape(-1).tolist())], bool)
        return None, (got == want).reshape(-1)
    g, w = got.astype(np.float64).reshape(-1), want.astype(np.float64).reshape(-1)
    nan_g, nan_w = np.isnan(g), np.isnan(w)
    finite = np.isfinite(w) & np.isfinite(g)
    rtol, atol = TOLERANCE.get(np.dtype(np.float32) if loose else want.dtype, (1e-4, 1e-5))
    scale = max(1.0, float(np.abs(w[np.isfinite(w)]).max())) if np.isfinite(w).any() else 1.0
    with np.errstate(all="ignore"):
        ok = (nan_g & nan_w) | (~nan_g & ~nan_w & ~finite & (g == w)) | \
            (finite & (np.abs(g - w) <= atol * scale + rtol * np.abs(w)))
    return None, ok


def close(got, want, loose: bool = False) -> Optional[str]:
    """None if ``got`` matches ``want`` (:func:`agreement`), else what differs."""
    problem, ok = agreement(got, want, loose)
    if problem or ok.all():
        return problem
    bad = np.flatnonzero(~ok)
    g, w = np.asarray(got).reshape(-1), np.asarray(want).reshape(-1)
    return f"{bad.size} of {ok.size} differ, first at {bad[0]}: {g[bad[0]]!r} != {w[bad[0]]!r}"
