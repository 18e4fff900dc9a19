"""NonMaxSuppression (ai.onnx 10, 11) on the cpu backend: the portable kernel's rules
(kernels/image.py) as one compiled loop over every (batch, class) (:mod:`onnxkit_cpu.compiled.image`).

The portable kernel sorts each class' candidates and suppresses with one numpy IOU row per kept
box; a YOLO head (80 classes, 8,400 boxes) then spends its time in numpy's per-call cost.  Here
the argument checks and thresholds are the portable ``nms_arguments`` (the same errors), and one
compiled call forms the float32 box planes once per batch, pops each class' candidates from a
heap (only as many as the class keeps, or all when suppression leaves fewer) and tests each
against the boxes kept so far.  Where compiled loops are off the portable kernel runs.  The
selected indices equal the portable kernel's, hence onnxruntime's
(plugins/cpu_backend/tests/test_nms_fast.py).
"""

from __future__ import annotations

import numpy as np
from onnxkit_default_domain.api import image as portable

from onnxkit.plugin import KernelTable
from onnxkit_cpu.compiled.image import nms_loop

KERNELS = KernelTable()


@KERNELS.register("NonMaxSuppression", 10, 11, host_only=True)
def non_max_suppression(ctx):
    fallback = portable.non_max_suppression(ctx)
    loop = nms_loop()
    if loop is None:
        return fallback
    center = int(ctx.attr("center_point_box"))

    def run(boxes, scores, max_output_boxes_per_class=None, iou_threshold=None, score_threshold=None):
        limit, iou_thr, score_thr = portable.nms_arguments(ctx, boxes, scores, max_output_boxes_per_class,
                                                           iou_threshold, score_threshold)
        nb, nbox = boxes.shape[:2]
        rows = nb * scores.shape[1] * min(limit, nbox)
        if rows == 0:
            return np.zeros((0, 3), dtype=np.int64)
        out = np.empty((rows, 3), dtype=np.int64)
        count = loop(np.ascontiguousarray(boxes, dtype=np.float32), np.ascontiguousarray(scores, dtype=np.float32),
                     center, limit, iou_thr, score_thr is not None,
                     np.float32(0) if score_thr is None else score_thr, out)
        return out[:count].copy()

    return run
