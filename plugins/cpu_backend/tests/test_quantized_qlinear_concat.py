"""QLinearConcat's table path (onnxkit_cpu/overrides/quantized_microsoft.py ``_concat``: each
input's codes through a table the portable kernel makes on its 256 codes, then one concatenate)
against the portable kernel, bit for bit, and onnxruntime, within one step: uint8 and int8, two
and three inputs of their own scales and zero points (one equal to Y's), each axis, negative
axes; a near miss (a per-axis scale) keeps the portable kernel, which refuses it."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxkit_microsoft")
from onnx import TensorProto as TP  # noqa: E402
from quantized_harness import (MS, build, identical, onnxkit_outputs, portable_kernels, three_ways,  # noqa: E402
                               within_one_step)

from onnxkit.errors import EvaluationError  # noqa: E402

from onnxkit_cpu.compiled import quantized as loops  # noqa: E402

RNG = np.random.default_rng(4242)


def _codes(dtype, shape):
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max + 1, shape).astype(dtype)


def _inputs(dtype, shapes, axis):
    y = [np.array(0.037, np.float32), np.array(3 if dtype == np.int8 else 131, dtype)]
    params = [(0.037, 3 if dtype == np.int8 else 131), (0.021, -7 if dtype == np.int8 else 100), (0.09, 0)]
    out = list(y)
    for shape, (s, z) in zip(shapes, params):
        out += [_codes(dtype, shape), np.array(s, np.float32), np.array(z, dtype)]
    return out


@pytest.fixture
def looked_up(monkeypatch):
    """How many inputs the compiled lookup served."""
    seen = []
    real = loops.lookup.get()
    assert real is not None

    def counted(x, t, y):
        seen.append(x.size)
        return real(x, t, y)

    class Stub:
        @staticmethod
        def get():
            return counted
    monkeypatch.setattr(loops, "lookup", Stub)
    return seen


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("shapes,axis", [([(2, 3, 4), (2, 5, 4)], 1), ([(2, 3, 4), (2, 3, 1), (2, 3, 6)], -1),
                                         ([(1, 4), (3, 4), (2, 4)], 0), ([(2, 2, 8), (2, 3, 8)], -2)])
def test_concat_by_tables_equals_the_portable_kernel(dtype, shapes, axis, looked_up):
    fast, ref, theirs = three_ways("QLinearConcat", _inputs(dtype, shapes, axis), {"axis": axis},
                                   out_types=[TP.UINT8 if dtype == np.uint8 else TP.INT8], domain=MS)
    identical(fast[0], ref[0])
    within_one_step(fast[0], theirs[0])
    assert looked_up == [int(np.prod(s)) for s in shapes]


def test_a_per_axis_scale_keeps_the_portable_kernel(looked_up):
    inputs = _inputs(np.uint8, [(2, 3), (2, 3)], 1)
    inputs[3] = np.array([0.02, 0.03], np.float32)          # not one value: the portable kernel decides (refuses)
    data, feed = build("QLinearConcat", inputs, {"axis": 1}, out_types=[TP.UINT8], domain=MS)
    messages = []
    for portable in (False, True):
        with (portable_kernels("QLinearConcat", MS) if portable else contextlib.nullcontext()):
            with pytest.raises(EvaluationError) as err:
                onnxkit_outputs(data, feed)
        messages.append(str(err.value))
    assert messages[0] == messages[1] and "scale" in messages[0]
    assert looked_up == []
