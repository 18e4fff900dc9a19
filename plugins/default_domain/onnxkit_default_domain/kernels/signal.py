"""Signal processing of ai.onnx: DFT, STFT, the Hann/Hamming/Blackman windows, MelWeightMatrix
(every backend).

DFT-17 reads its axis from the ``axis`` attribute (default 1), DFT-20 from the ``axis`` input
(default -2); forward, inverse, one-sided forward (a real FFT) and one-sided inverse (its
inverse), with ``dft_length`` cropping or zero-padding.  The transforms run in ``xp.fft`` in
the input's precision (double for DOUBLE, single otherwise) and are cast to the input's element
type.  DFT is host_only: torch's FFT (single or double precision) differs from numpy's pocketfft
by up to 1e-6 where an inverse transform's exact result is near zero, beyond the float32
tolerance the node vectors (made with numpy) allow, so the gpu backend runs DFT on its cpu
fallback; STFT (forward transforms, within tolerance) runs on every backend.  The transform
length and the output extents come from
:func:`~onnxkit_default_domain.inference.signal.dft_extents` and
:func:`~onnxkit_default_domain.inference.signal.stft_extents`, which inference uses too.  The
windows and the mel matrix depend on scalars only: they are computed on the host in double
precision and handed to the backend.

Choices where the specification is silent: a one-sided forward DFT/STFT of a complex input
returns the first ``n//2+1`` bins of the full transform (as the ONNX reference implementation
does); a symmetric window of size 1 is ``[1]`` (the limit of the formula, as numpy's window
functions give); a window cast to an integer type truncates toward zero.
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import KernelTable, arrays, calls_blas, element_type, size_guard
from onnxkit_default_domain.inference.signal import dft_extents, stft_extents

from ._common import shape_of

KERNELS = KernelTable()


def _scalar_int(ctx, v, name: str) -> int:
    a = ctx.to_host(v)
    if a.size != 1:
        ctx.fail(f"{name} must be a scalar, got shape {list(a.shape)}")
    if not arrays.is_integer(a.dtype):
        ctx.fail(f"{name} must be an integer, got {a.dtype}")
    return int(a.reshape(-1)[0])


def _complex_signal(ctx, x):
    """The complex (or real) signal of an input whose last dimension is 1 (real) or 2 (complex),
    in the working precision: float64 / complex128 for DOUBLE, float32 / complex64 otherwise."""
    xp = ctx.xp
    if x.ndim < 2 or int(x.shape[-1]) not in (1, 2):
        ctx.fail(f"the input's last dimension must be 1 (real) or 2 (complex), got shape {shape_of(x)}")
    double = arrays.dtype_name(x.dtype) == "float64"
    xf = xp.astype(x, xp.float64 if double else xp.float32, copy=False)
    if int(x.shape[-1]) == 1:
        return xf[..., 0], False
    cdt = xp.complex128 if double else xp.complex64
    return xp.astype(xf[..., 0], cdt) + 1j * xp.astype(xf[..., 1], cdt), True


def _pack(xp, y, dtype):
    """Complex (or real) result -> the [..., 2] (or [..., 1]) real representation."""
    if arrays.is_complex(y.dtype):
        out = xp.stack([xp.real(y), xp.imag(y)], axis=-1)
    else:
        out = xp.expand_dims(y, axis=-1)
    return xp.astype(out, dtype, copy=False)


def _leading(y, axis: int, n: int):
    """The first ``n`` entries of ``y`` along ``axis``."""
    return y[(slice(None),) * axis + (slice(0, n),)]


# ------------------------------------------------------------------------------------ DFT

@KERNELS.register("DFT", 17, 20, host_only=True)
@size_guard("value")
@calls_blas
def dft(ctx):
    xp = ctx.xp
    inverse = bool(ctx.attr("inverse"))
    onesided = bool(ctx.attr("onesided"))
    attr_axis = int(ctx.attr("axis", 1)) if ctx.since_version < 20 else None

    def fn(x, dft_length=None, axis=None):
        r = x.ndim
        if attr_axis is not None:
            ax = attr_axis
        else:
            ax = -2 if axis is None else _scalar_int(ctx, axis, "axis")
        if not (-r <= ax <= -2 or 0 <= ax <= r - 2):
            ctx.fail(f"axis {ax} is out of range for an input of rank {r} (accepted: [-r, -2] and [0, r-2])")
        ax = ax % r
        sig, is_complex = _complex_signal(ctx, x)
        length = None if dft_length is None else _scalar_int(ctx, dft_length, "dft_length")
        n, extent = dft_extents(int(sig.shape[ax]), length, inverse, onesided)
        if n <= 0:
            ctx.fail(f"dft_length must be positive, got {n}")
        if inverse:
            y = xp.fft.irfft(sig, n=n, axis=ax) if onesided else xp.fft.ifft(sig, n=n, axis=ax)
        elif onesided and not is_complex:
            y = xp.fft.rfft(sig, n=n, axis=ax)
        else:
            y = xp.fft.fft(sig, n=n, axis=ax)
            if onesided:
                y = _leading(y, ax, extent)
        return _pack(xp, y, x.dtype)

    return fn


# ------------------------------------------------------------------------------------ STFT

@KERNELS.register("STFT", 17)
@size_guard("value")
@calls_blas
def stft(ctx):
    xp = ctx.xp
    onesided = bool(ctx.attr("onesided"))

    def fn(signal, frame_step, window=None, frame_length=None):
        if signal.ndim != 3:
            ctx.fail(f"signal must have rank 3 [batch, length, 1 or 2], got shape {shape_of(signal)}")
        sig, is_complex = _complex_signal(ctx, signal)
        length = int(sig.shape[1])
        step = _scalar_int(ctx, frame_step, "frame_step")
        if step <= 0:
            ctx.fail(f"frame_step must be positive, got {step}")
        if window is not None and window.ndim != 1:
            ctx.fail(f"window must be 1-D, got shape {shape_of(window)}")
        if frame_length is not None:
            fl = _scalar_int(ctx, frame_length, "frame_length")
            if window is not None and int(window.shape[0]) != fl:
                ctx.fail(f"window length {int(window.shape[0])} differs from frame_length {fl}")
        else:
            fl = int(window.shape[0]) if window is not None else length
        if fl <= 0 or fl > length:
            ctx.fail(f"frame length {fl} must be in [1, signal length {length}]")
        frames, bins = stft_extents(length, fl, step, onesided)
        idx = (np.arange(frames)[:, None] * step + np.arange(fl)[None, :]).reshape(-1)
        framed = xp.reshape(xp.take(sig, ctx.from_host(idx), axis=1), (int(sig.shape[0]), frames, fl))
        if window is not None:
            real = xp.float64 if arrays.dtype_name(framed.dtype) in ("float64", "complex128") else xp.float32
            framed = framed * xp.astype(window, real)
        if onesided and not is_complex:
            y = xp.fft.rfft(framed, n=fl, axis=-1)
        else:
            y = xp.fft.fft(framed, n=fl, axis=-1)
            if onesided:
                y = y[..., :bins]
        return _pack(xp, y, signal.dtype)

    return fn


# --------------------------------------------------------------------------------- windows

def _window(ctx, a0: float, a1: float, a2: float):
    periodic = bool(ctx.attr("periodic"))
    out_dtype = element_type(int(ctx.attr("output_datatype"))).dtype

    def fn(size):
        n = _scalar_int(ctx, size, "size")
        if n < 0:
            ctx.fail(f"size must be >= 0, got {n}")
        denom = n if periodic else n - 1
        if denom <= 0:
            w = np.ones(n, dtype=np.float64)
        else:
            ang = 2.0 * np.pi * np.arange(n, dtype=np.float64) / denom
            w = a0 - a1 * np.cos(ang) + a2 * np.cos(2.0 * ang)
        return ctx.from_host(w.astype(out_dtype))

    return fn


@KERNELS.register("HannWindow", 17)
@size_guard("value")
def hann_window(ctx):
    return _window(ctx, 0.5, 0.5, 0.0)


@KERNELS.register("HammingWindow", 17)
@size_guard("value")
def hamming_window(ctx):
    alpha = 25.0 / 46.0
    return _window(ctx, alpha, 1.0 - alpha, 0.0)


@KERNELS.register("BlackmanWindow", 17)
@size_guard("value")
def blackman_window(ctx):
    return _window(ctx, 0.42, 0.5, 0.08)


# ------------------------------------------------------------------------- MelWeightMatrix

@KERNELS.register("MelWeightMatrix", 17)
@size_guard("value")
def mel_weight_matrix(ctx):
    out_dtype = element_type(int(ctx.attr("output_datatype"))).dtype

    def fn(num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz):
        n_mel = _scalar_int(ctx, num_mel_bins, "num_mel_bins")
        n_dft = _scalar_int(ctx, dft_length, "dft_length")
        rate = _scalar_int(ctx, sample_rate, "sample_rate")
        lo = float(ctx.to_host(lower_edge_hertz).astype(np.float64).reshape(-1)[0])
        hi = float(ctx.to_host(upper_edge_hertz).astype(np.float64).reshape(-1)[0])
        if n_mel <= 0 or n_dft <= 0 or rate <= 0:
            ctx.fail("num_mel_bins, dft_length and sample_rate must be positive")
        n_spec = n_dft // 2 + 1
        lo_mel = 2595.0 * np.log10(1.0 + lo / 700.0)
        hi_mel = 2595.0 * np.log10(1.0 + hi / 700.0)
        step = (hi_mel - lo_mel) / (n_mel + 2)
        mels = np.arange(n_mel + 2, dtype=np.float64) * step + lo_mel
        hz = 700.0 * (10.0 ** (mels / 2595.0) - 1.0)
        bins = np.floor((n_dft + 1) * hz / rate).astype(np.int64)
        if bins.min() < 0 or bins.max() > n_spec:
            ctx.fail(f"the frequency range [{lo}, {hi}] Hz maps outside the {n_spec} spectrogram bins")
        out = np.zeros((n_spec, n_mel), dtype=np.float64)
        j = np.arange(n_spec)
        for i in range(n_mel):  # one triangle (output column) at a time
            left, center, right = bins[i], bins[i + 1], bins[i + 2]
            if center >= n_spec:
                ctx.fail(f"mel bin {i} centre {center} lies outside the {n_spec} spectrogram bins")
            if center == left:
                out[center, i] = 1.0
            else:
                up = (j >= left) & (j <= center)
                out[up, i] = (j[up] - left) / (center - left)
            if right > center:
                down = (j >= center) & (j < right)
                out[down, i] = (right - j[down]) / (right - center)
        return ctx.from_host(out.astype(out_dtype))

    return fn
