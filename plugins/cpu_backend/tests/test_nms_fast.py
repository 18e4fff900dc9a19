"""NonMaxSuppression: the cpu override's compiled loop (overrides/image.py, compiled/image.py),
the portable kernel (kernels/image.py, the same node planned under ``compiled.disabled()``) and
onnxruntime 1.32 (one thread) give the same selected indices, row for row, over random sizes and
the near misses: equal scores (ties by the lower index), duplicate and zero-area boxes, IOUs
that round to the threshold exactly, flipped corners, NaN and inf scores and coordinates, every
combination of the optional inputs, limits 1 / small / larger than the boxes.  A spy counts the
compiled loop's calls, so the fast path cannot silently stop being taken.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper  # noqa: E402

from onnxkit.errors import OnnxkitError  # noqa: E402
from onnxkit.runtime import InferenceSession  # noqa: E402
from onnxkit_cpu import compiled  # noqa: E402
from onnxkit_cpu.compiled import image as loops  # noqa: E402

pytestmark = [pytest.mark.skipif(not compiled.available(), reason="numba is not installed"),
              pytest.mark.usefixtures("warm_bodies")]

RNG = np.random.default_rng(2718)
NAMES = ("boxes", "scores", "max_output_boxes_per_class", "iou_threshold", "score_threshold")
TYPES = (TP.FLOAT, TP.FLOAT, TP.INT64, TP.FLOAT, TP.FLOAT)


def model(n_inputs: int, center: int, opset: int = 11) -> bytes:
    ins = [helper.make_tensor_value_info(NAMES[i], TYPES[i], None) for i in range(n_inputs)]
    node = helper.make_node("NonMaxSuppression", list(NAMES[:n_inputs]), ["selected"], center_point_box=center)
    g = helper.make_graph([node], "nms", ins, [helper.make_tensor_value_info("selected", TP.INT64, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8).SerializeToString()


class Trio:
    """The three sessions of one model: compiled, portable, onnxruntime."""

    def __init__(self, n_inputs, center, opset=11):
        data = model(n_inputs, center, opset)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.fast = InferenceSession(data, validate=False)
            with compiled.disabled():
                self.portable = InferenceSession(data, validate=False)
        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        self.ort = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
        self.n = n_inputs

    def feeds(self, boxes, scores, limit=None, iou=None, score=None):
        values = (boxes, scores, None if limit is None else np.int64([limit]),
                  None if iou is None else np.float32([iou]), None if score is None else np.float32([score]))
        return {NAMES[i]: values[i] for i in range(self.n)}

    def check(self, *args, **kw):
        f = self.feeds(*args, **kw)
        want = self.ort.run(None, f)[0]
        fast = self.fast.run(None, f)[0]
        port = self.portable.run(None, f)[0]
        assert fast.dtype == port.dtype == np.int64
        np.testing.assert_array_equal(fast, want)
        np.testing.assert_array_equal(port, want)
        return want


@pytest.fixture
def spy(count_calls):
    """Runs of the compiled loop (sessions planned after this fixture)."""
    return count_calls(loops, "_NMS")


@pytest.fixture
def trios(spy):
    return {(n, c): Trio(n, c) for n in (2, 3, 4, 5) for c in (0, 1)}


def corner_boxes(b, n, grid=None):
    """(b, n, 4) corner boxes, some with flipped corners; on an integer grid when ``grid``."""
    if grid:
        p = RNG.integers(0, grid, (b, n, 4)).astype(np.float32)
    else:
        p = (RNG.random((b, n, 4)) * 100).astype(np.float32)
    return p


def centre_boxes(b, n, grid=None):
    if grid:
        c = RNG.integers(0, grid, (b, n, 2))
        s = RNG.integers(0, 4, (b, n, 2)) * 2      # even sizes: exact halves; 0: zero-area boxes
        return np.concatenate([c, s], -1).astype(np.float32)
    c = RNG.random((b, n, 2)) * 100
    s = RNG.random((b, n, 2)) * 30
    return np.concatenate([c, s], -1).astype(np.float32)


def test_yolo_sized_classes_match_onnxruntime(trios, spy):
    t = trios[(5, 1)]
    boxes = centre_boxes(1, 2000)
    scores = (RNG.random((1, 80, 2000)) ** 12).astype(np.float32)     # few above 0.25 per class
    got = t.check(boxes, scores, 100, 0.45, 0.25)
    assert len(got) > 100 and spy.calls == 1


@pytest.mark.parametrize("center", [0, 1])
def test_random_sizes_and_near_misses(trios, center, spy):
    make = centre_boxes if center else corner_boxes
    expected = 0
    for trial in range(40):
        b, c, n = int(RNG.integers(1, 3)), int(RNG.integers(1, 4)), int(RNG.integers(0, 60))
        grid = (3, 5, None)[trial % 3]          # integer grids: duplicates, zero areas, IOUs at 1/2, 1/3
        boxes = make(b, n, grid)
        levels = (2, 4, 0)[trial % 3]           # equal scores (ties) on the grids
        scores = RNG.integers(0, levels, (b, c, n)).astype(np.float32) / levels if levels else \
            RNG.random((b, c, n)).astype(np.float32)
        iou = (0.5, 1 / 3, 0.25, 0.0, 1.0)[trial % 5]
        limit = (1, 3, 100, 2)[trial % 4]
        for n_inputs in (2, 3, 4, 5):
            t = trios[(n_inputs, center)]
            t.check(boxes, scores, limit, iou, 0.3 if trial % 2 else 0.0)
            expected += n_inputs >= 3 and n > 0      # no limit input: no box, no loop
    assert spy.calls == expected


def test_iou_exactly_at_the_threshold_is_kept(trios):
    t = trios[(4, 0)]
    boxes = np.float32([[[0, 0, 2, 2], [0, 0, 1, 2], [0, 0, 2, 1.5], [2, 2, 0, 0]]])   # IOU 0.5, 0.75, 1
    scores = np.float32([[[0.9, 0.8, 0.7, 0.6]]])
    got = t.check(boxes, scores, 10, 0.5)
    np.testing.assert_array_equal(got[:, 2], [0, 1])


def test_equal_scores_keep_the_lower_index_first(trios):
    t = trios[(3, 0)]
    boxes = np.float32([[[10 * i, 0, 10 * i + 5, 5] for i in range(12)]])
    scores = np.float32([[[1, 2, 1, 2, 0, 2, 1, 1, 2, 0, 0, 1]]])
    got = t.check(boxes, scores, 100)
    np.testing.assert_array_equal(got[:, 2], [1, 3, 5, 8, 0, 2, 6, 7, 11, 4, 9, 10])


@pytest.mark.parametrize("center", [0, 1])
def test_nan_and_inf_scores_and_coordinates(trios, center):
    make = centre_boxes if center else corner_boxes
    for trial in range(30):
        n = int(RNG.integers(1, 40))
        boxes = make(1, n, 4 if trial % 2 else None)
        scores = RNG.integers(0, 3, (1, 2, n)).astype(np.float32)
        scores[RNG.random(scores.shape) < 0.2] = np.nan
        scores[RNG.random(scores.shape) < 0.05] = np.inf
        boxes[RNG.random(boxes.shape) < 0.05] = np.nan
        boxes[RNG.random(boxes.shape) < 0.02] = np.inf
        trios[(4, center)].check(boxes, scores, int(RNG.integers(1, 50)), 0.5)    # NaN scores: the heap's order
        trios[(5, center)].check(boxes, scores, int(RNG.integers(1, 50)), 0.5, 0.5)


def test_limits_and_absent_inputs(trios):
    boxes = corner_boxes(2, 30, 6)
    scores = RNG.random((2, 3, 30)).astype(np.float32)
    for limit in (0, -3, 1, 30, 10**12):
        trios[(5, 1)].check(boxes, scores, limit, 0.2, 0.1)
    assert trios[(2, 0)].check(boxes, scores).shape == (0, 3)
    empty = np.zeros((1, 0, 4), np.float32)
    assert trios[(5, 0)].check(empty, np.zeros((1, 2, 0), np.float32), 5, 0.5, 0.1).shape == (0, 3)


@pytest.mark.parametrize("iou", [-0.1, 1.5, float("nan")])
def test_iou_threshold_outside_zero_one_is_refused(trios, iou):
    t = trios[(4, 0)]
    f = t.feeds(corner_boxes(1, 4), RNG.random((1, 1, 4)).astype(np.float32), 3, iou)
    with pytest.raises(Exception):
        t.ort.run(None, f)
    for s in (t.fast, t.portable):
        with pytest.raises(OnnxkitError, match="iou_threshold must be in"):
            s.run(None, f)
