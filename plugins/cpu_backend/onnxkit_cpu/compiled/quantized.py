"""Compiled loops of the integer quantization kernels (overrides/quantization.py,
overrides/quantized_conv.py, overrides/quantized_microsoft.py).

Every loop repeats, element by element, the portable kernel's numpy operations in their order
and precision, so its results are bit-identical to it (no fastmath: no contraction, no
reassociation; one +, -, *, / in float32 between float32 operands is the IEEE float32
operation, as numpy's):

* :data:`quantize` ``(x, s, z, lo, hi, y)``: ``x`` (P, C, Q) float32, ``s`` float32 and ``z``
  (the zero point, of its integer type, taken as float32) vectors of C values or of one (one
  for every channel), ``y`` (P, C, Q) of the quantized type:
  ``r = rint(x / s[c]) + z[c]`` (float32, ties to even), clipped to ``[lo, hi]``, a NaN giving
  ``z[c]`` — as :func:`onnxkit_default_domain.kernels.quantization.to_quantized` does (its
  ``round``, ``+ zw``, ``clip``, ``where(isnan, zw)``).
* :data:`dequantize` ``(x, s, z, y)``: ``x`` (P, C, Q) 8-bit, ``s`` and ``z`` as for
  :data:`quantize`, ``y`` float32:
  ``y = (float32(x) - z[c]) * s[c]``; the portable kernel skips the subtraction where every
  zero point is 0, which gives the same values (an integer minus 0.0 is itself).
* :data:`finite_range` ``(x)``: ``(min, max, finite)`` of a non-empty float32 vector;
  ``finite`` is False as soon as a NaN or an infinity is met (the caller then takes the
  portable kernel, whose NaN and inf rules it does not repeat).
* :data:`requantize` ``(acc, bias, mult, zp, lo, hi, y)``: ``acc`` (P, M, L) of exact integer
  sums (float32 or float64), ``bias`` and ``mult`` (M,) float64, ``y`` (P, M, L) 8-bit:
  ``rint((float64(acc) + bias[m]) * mult[m] + zp)`` clipped to ``[lo, hi]`` — QLinearConv's
  float64 ``acc += B``, ``acc * mult``, ``+ zp``, ``round``, ``clip`` (bias 0.0 where B is
  absent: adding 0.0 to an integer sum changes nothing).
* :data:`requantize_rows` ``(acc, bias, mult, zp, lo, hi, y)``: :data:`requantize` for ``acc``
  (P, N) with one multiplier and bias per column (a product's columns: the vectors run along
  them), the same operations (``min(max(r, lo), hi)``: ``r`` is never NaN).
* :data:`qlinear_binary` ``(a, za, sa, b, zb, sb, sc, zc, lo, hi, op, y)``: flat 8-bit ``a``
  and ``y`` of one size, ``b`` flat of a size dividing it (repeated along ``a``: element ``i``
  pairs ``a[i]`` with ``b[i % b.size]``), float64 scalars: ``(float64(a) - za) * sa`` combined
  with ``b``'s by ``+`` (op 0) or ``*`` (op 1), ``rint(v / sc) + zc`` clipped (as ``min(max(r,
  lo), hi)``: the caller takes it only for finite scales, ``sc`` nonzero, so no NaN arises) —
  QLinearAdd / QLinearMul's float64 dequantize, combine, requantize.
* :data:`depthwise` ``(x, zp, w, sh, sw, dh, dw, top, left, bias, mult, yzp, lo, hi, requant, y)``:
  the depthwise convolution (one input channel per output channel) of 8-bit ``x`` (N, C, H, W)
  minus ``zp`` (float32) by ``w`` (C, kh, kw), float32 weights minus their zero points, into
  ``y`` (N, C, oh, ow), padding positions taken as 0 (they contribute 0): each output's sum of
  ``(float32(x) - zp) * w`` in float32, in no particular order (a channel's padded plane split
  into stride phases, each tap over the whole output one contiguous run of a phase; at a column
  stride of 2 both phases of an input row are filled in one pass over its pairs of columns),
  **exact** where the caller checked ``amax * L1 <= 2^24``
  (``overrides/quantized_conv.py``: every partial sum an integer a float32 holds); then with
  ``requant`` QLinearConv's requantization (:data:`requantize`'s float64 operations,
  ``clip`` as ``min(max(r, lo), hi)``: never NaN), else the sum itself (ConvInteger's int32).
* :data:`depthwise_channels_last`: :data:`depthwise`'s arguments and results, the input taken
  channels-last (each output's taps vectors of channels, padding skipped): the loop for small
  outputs, whose rows are too short for :data:`depthwise`'s runs
  (``overrides/quantized_conv.py`` chooses).
* :data:`qgemm_finish` ``(acc, c, alpha, a_scale, b_scale, y_scale, zp, lo, hi, requant, y)``:
  QGemm's float64 operations on the exact sums ``acc`` (P, N) float64, in the portable kernel's
  order: ``v = ((acc + c[n]) * alpha) * a_scale * b_scale[n]`` (``c`` and ``b_scale`` float64
  vectors of N values or of one), then with ``requant`` ``rint(v / y_scale) + zp`` clipped (as
  ``min(max(r, lo), hi)``: the caller takes it only for a finite nonzero ``y_scale`` and finite
  values) into ``y`` of the 8-bit type, else ``v`` into ``y`` (float32: one rounding, the
  portable ``astype``).
* :data:`qlinear_softmax` ``(x, zp, scale, lo_x, y_scale, y_zp, lo, hi, y)``: QLinearSoftmax of
  the rows of ``x`` (R, n) 8-bit (``lo_x`` its type's lowest value), the portable kernel's float64
  steps: ``d = (float64(x) - zp) * scale``, ``e = exp(d - max(d))`` (the maximum from the largest
  code: ``scale > 0``, the caller's condition; one exp per distinct code of a row where the row
  holds more elements than codes), the row's sum in order, then ``rint((e / sum) / y_scale) +
  y_zp`` clipped (``min(max(r, lo), hi)``) into ``y``.  The sum's order is not numpy's pairwise
  one: the result may differ from the portable kernel's where a value lies within that rounding
  of a half-integer, by one step.
* :data:`centered_columns` ``(x, zp, kh, kw, sh, sw, dh, dw, top, left, oh, ow, cols)``: the
  im2col columns of an 8-bit ``x`` (N, C, H, W) minus its zero point, as float32 ``cols``
  (N, C * kh * kw, oh * ow) in the portable kernel's row order (channel, then kernel row, then
  kernel column): ``cols[n, (c*kh + i)*kw + j, a*ow + b] = float32(x[n, c, y, x']) - zp`` with
  ``y = a*sh + i*dh - top``, ``x' = b*sw + j*dw - left``, and 0 where that position is padding
  (the zero points apply to the data only).  Every value is an exact small integer.
* :data:`lookup` ``(x, table, y)``: ``y[i] = table[x[i]]`` for a flat uint8 ``x`` (an 8-bit
  tensor's codes through their uint8 view), a ``table`` of 256 values and ``y`` flat of ``x``'s
  size (ai.onnxkit LookupTable's lookup, as numpy's ``take``).
"""

from __future__ import annotations

import numpy as np

from onnxkit_cpu.compiled import kernel


@kernel
def quantize(x, s, z, lo, hi, y):
    p_count, c_count, q_count = x.shape
    per_s, per_z = s.shape[0] > 1, z.shape[0] > 1
    for p in range(p_count):
        for c in range(c_count):
            sc = s[c if per_s else 0]
            zc = np.float32(z[c if per_z else 0])
            for q in range(q_count):
                r = np.rint(x[p, c, q] / sc) + zc
                if r < lo:
                    r = lo
                elif r > hi:
                    r = hi
                elif r != r:
                    r = zc
                y[p, c, q] = r


@kernel
def dequantize(x, s, z, y):
    p_count, c_count, q_count = x.shape
    per_s, per_z = s.shape[0] > 1, z.shape[0] > 1
    for p in range(p_count):
        for c in range(c_count):
            sc = s[c if per_s else 0]
            zc = np.float32(z[c if per_z else 0])
            for q in range(q_count):
                y[p, c, q] = (np.float32(x[p, c, q]) - zc) * sc


@kernel
def finite_range(x):
    lo = x[0]
    hi = x[0]
    for i in range(x.shape[0]):
        v = x[i]
        if v - v != 0:            # NaN or an infinity
            return lo, hi, False
        if v < lo:
            lo = v
        elif v > hi:
            hi = v
    return lo, hi, True


@kernel
def requantize(acc, bias, mult, zp, lo, hi, y):
    p_count, m_count, l_count = acc.shape
    for p in range(p_count):
        for m in range(m_count):
            b = bias[m]
            k = mult[m]
            for i in range(l_count):
                r = np.rint((np.float64(acc[p, m, i]) + b) * k + zp)
                if r < lo:
                    r = lo
                elif r > hi:
                    r = hi
                y[p, m, i] = r


@kernel
def qlinear_binary(a, za, sa, b, zb, sb, sc, zc, lo, hi, op, y):
    t_count = b.shape[0]
    for r in range(a.shape[0] // t_count):
        base = r * t_count
        if op == 0:
            for j in range(t_count):
                u = (np.float64(a[base + j]) - za) * sa
                v = (np.float64(b[j]) - zb) * sb
                y[base + j] = min(max(np.rint((u + v) / sc) + zc, lo), hi)
        else:
            for j in range(t_count):
                u = (np.float64(a[base + j]) - za) * sa
                v = (np.float64(b[j]) - zb) * sb
                y[base + j] = min(max(np.rint((u * v) / sc) + zc, lo), hi)


@kernel
def centered_columns(x, zp, kh, kw, sh, sw, dh, dw, top, left, oh, ow, cols):
    n_count, c_count, h, w = x.shape
    for n in range(n_count):
        for c in range(c_count):
            for i in range(kh):
                for j in range(kw):
                    row = (c * kh + i) * kw + j
                    for a in range(oh):
                        y = a * sh + i * dh - top
                        base = a * ow
                        if y < 0 or y >= h:
                            for b in range(ow):
                                cols[n, row, base + b] = 0.0
                            continue
                        for b in range(ow):
                            xx = b * sw + j * dw - left
                            if xx < 0 or xx >= w:
                                cols[n, row, base + b] = 0.0
                            else:
                                cols[n, row, base + b] = np.float32(x[n, c, y, xx]) - zp


@kernel
def depthwise(x, zp, w, sh, sw, dh, dw, top, left, bias, mult, yzp, lo, hi, requant, y):
    n_count, c_count, h, wd = x.shape
    kh, kw = w.shape[1], w.shape[2]
    oh, ow = y.shape[2], y.shape[3]
    # One channel at a time.  Its padded input (row r of the padded plane is input row r - top,
    # column q input column q - left; padding 0: it contributes 0) is kept split into sh x sw
    # phases, phase (py, px) holding the padded rows py, py + sh, ... and columns px, px + sw, ...
    # of the plane, each phase wq columns wide.  The input to a tap (i, j) of output (a, b) is
    # padded (a*sh + i*dh, b*sw + j*dw): in phase ((i*dh) % sh, (j*dw) % sw), at row
    # a + (i*dh) // sh and column b + (j*dw) // sw, so one tap over the whole output, laid out
    # (oh, wq) (columns from ow on unused), is one contiguous run of its phase.
    hp = max(h + top, (oh - 1) * sh + (kh - 1) * dh + 1)
    wp = max(wd + left, (ow - 1) * sw + (kw - 1) * dw + 1)
    hq = (hp + sh - 1) // sh
    wq = (wp + sw - 1) // sw
    length = oh * wq
    phases = np.zeros((sh * sw, (hq + 1) * wq), np.float32)   # a row of slack: a run's unused end
    flat = phases.reshape(-1)
    stride = (hq + 1) * wq
    acc = np.empty(length, np.float32)
    for n in range(n_count):
        for c in range(c_count):
            for yy in range(h):
                py = (yy + top) % sh
                r = (yy + top) // sh
                src = x[n, c, yy]
                if sw == 2 and wd >= 2:
                    # both phases of the row in one pass over its pairs of columns (an interleaved
                    # read): column q is in phase (q + left) % 2, at (q + left) // 2
                    pa = left % 2
                    row_base = py * 2 * stride + r * wq
                    ua = np.uint64(row_base + pa * stride + left // 2)
                    ub = np.uint64(row_base + (1 - pa) * stride + (1 + left) // 2)
                    half = wd // 2
                    two = np.uint64(2)
                    for t in range(np.uint64(half)):
                        flat[ua + t] = np.float32(src[two * t]) - zp
                        flat[ub + t] = np.float32(src[two * t + np.uint64(1)]) - zp
                    if wd % 2:
                        flat[ua + np.uint64(half)] = np.float32(src[wd - 1]) - zp
                    continue
                for px in range(sw):
                    x0 = (px - left) % sw                   # the first input column of this phase
                    if x0 >= wd:
                        continue
                    count = (wd - x0 + sw - 1) // sw
                    base = np.uint64((py * sw + px) * stride + r * wq + (x0 + left) // sw)
                    if sw == 1:
                        for t in range(np.uint64(count)):
                            flat[base + t] = np.float32(src[t]) - zp
                    else:
                        s = src[x0:]
                        for t in range(np.uint64(count)):
                            flat[base + t] = np.float32(s[t * np.uint64(sw)]) - zp
            for t in range(np.uint64(length)):
                acc[t] = 0.0
            # up to three taps of a kernel row per pass (the float32 sums are exact in any order)
            for i in range(kh):
                py = (i * dh) % sh
                row = (i * dh) // sh * wq
                for j0 in range(0, kw, 3):
                    taps = min(3, kw - j0)
                    j1 = j0 + min(1, taps - 1)
                    j2 = j0 + min(2, taps - 1)
                    t0 = w[c, i, j0]
                    t1 = w[c, i, j1] if taps > 1 else np.float32(0)
                    t2 = w[c, i, j2] if taps > 2 else np.float32(0)
                    # each tap's run as an offset into the flat phases (slices of the 2-D
                    # array kept the loop scalar: numba's views defeat LLVM's vectorizer)
                    b0 = (py * sw + (j0 * dw) % sw) * stride + row + (j0 * dw) // sw
                    b1 = (py * sw + (j1 * dw) % sw) * stride + row + (j1 * dw) // sw
                    b2 = (py * sw + (j2 * dw) % sw) * stride + row + (j2 * dw) // sw
                    u0, u1, u2 = np.uint64(b0), np.uint64(b1), np.uint64(b2)
                    for t in range(np.uint64(length)):      # unsigned: no wrap check
                        acc[t] = acc[t] + flat[u0 + t] * t0 + flat[u1 + t] * t1 + flat[u2 + t] * t2
            b_c = bias[c]
            k_c = mult[c]
            for a in range(oh):
                out = y[n, c, a]
                sums = acc[a * wq:a * wq + ow]
                if requant:
                    for b in range(np.uint64(ow)):
                        out[b] = min(max(np.rint((np.float64(sums[b]) + b_c) * k_c + yzp), lo), hi)
                else:
                    for b in range(np.uint64(ow)):
                        out[b] = sums[b]


@kernel
def depthwise_channels_last(x, zp, w, sh, sw, dh, dw, top, left, bias, mult, yzp, lo, hi, requant, y):
    n_count, c_count, h, wd = x.shape
    kh, kw = w.shape[1], w.shape[2]
    oh, ow = y.shape[2], y.shape[3]
    # channels last, centered, float32: each output's taps are contiguous vectors of channels
    xt = np.empty((h, wd, c_count), np.float32)
    wt = np.empty((kh, kw, c_count), np.float32)
    for c in range(c_count):
        for i in range(kh):
            for j in range(kw):
                wt[i, j, c] = w[c, i, j]
    acc = np.empty((ow, c_count), np.float32)
    for n in range(n_count):
        for yy in range(h):
            for c0 in range(0, c_count, 16):        # blocks of channels: short strided runs
                c1 = min(c_count, c0 + 16)
                for xx in range(wd):
                    dst = xt[yy, xx]
                    for c in range(c0, c1):
                        dst[c] = np.float32(x[n, c, yy, xx]) - zp
        for a in range(oh):
            for b in range(ow):
                row = acc[b]
                for c in range(c_count):
                    row[c] = 0.0
                for i in range(kh):
                    yy = a * sh + i * dh - top
                    if yy < 0 or yy >= h:
                        continue
                    for j in range(kw):
                        xx = b * sw + j * dw - left
                        if xx < 0 or xx >= wd:
                            continue
                        src = xt[yy, xx]
                        tap = wt[i, j]
                        for c in range(np.uint64(c_count)):     # unsigned: no wrap check, vectorized
                            row[c] += src[c] * tap[c]
            for c in range(c_count):
                out = y[n, c, a]
                if requant:
                    b_c = bias[c]
                    k_c = mult[c]
                    for b in range(ow):
                        out[b] = min(max(np.rint((np.float64(acc[b, c]) + b_c) * k_c + yzp), lo), hi)
                else:
                    for b in range(ow):
                        out[b] = acc[b, c]


@kernel
def qgemm_finish(acc, c, alpha, a_scale, b_scale, y_scale, zp, lo, hi, requant, y):
    p_count, n_count = acc.shape
    per_c, per_b = c.shape[0] > 1, b_scale.shape[0] > 1
    for p in range(p_count):
        src = acc[p]
        dst = y[p]
        for n in range(n_count):
            v = ((src[n] + c[n if per_c else 0]) * alpha) * a_scale * b_scale[n if per_b else 0]
            if requant:
                dst[n] = min(max(np.rint(v / y_scale) + zp, lo), hi)
            else:
                dst[n] = v


@kernel
def qlinear_softmax(x, zp, scale, lo_x, y_scale, y_zp, lo, hi, y):
    rows, n = x.shape
    # every code's dequantized value, as the portable kernel forms it
    d = np.empty(256)
    for v in range(256):
        d[v] = (np.float64(v + lo_x) - zp) * scale
    e = np.empty(n)
    table = np.empty(256)
    for r in range(rows):
        src = x[r]
        top = np.int64(src[0]) - lo_x
        bottom = top
        for j in range(n):
            c = np.int64(src[j]) - lo_x
            if c > top:
                top = c
            elif c < bottom:
                bottom = c
        m = d[top]
        if n > top - bottom + 1:        # fewer codes than elements: each code's exp once
            for v in range(bottom, top + 1):
                table[v] = np.exp(d[v] - m)
            for j in range(n):
                e[j] = table[np.int64(src[j]) - lo_x]
        else:
            for j in range(n):
                e[j] = np.exp(d[np.int64(src[j]) - lo_x] - m)
        s = 0.0
        for j in range(n):
            s += e[j]
        dst = y[r]
        for j in range(n):
            dst[j] = min(max(np.rint((e[j] / s) / y_scale) + y_zp, lo), hi)


@kernel
def requantize_rows(acc, bias, mult, zp, lo, hi, y):
    p_count, n_count = acc.shape
    for p in range(p_count):
        src = acc[p]
        dst = y[p]
        for n in range(n_count):
            dst[n] = min(max(np.rint((np.float64(src[n]) + bias[n]) * mult[n] + zp), lo), hi)


@kernel
def lookup(x, table, y):
    for i in range(x.shape[0]):
        y[i] = table[x[i]]
