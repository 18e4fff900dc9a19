"""Image operators of ai.onnx: ImageDecoder and NonMaxSuppression (host_only: Pillow decodes
images, and the greedy suppression runs over numpy arrays; the gpu backend runs these nodes on
its cpu fallback).

* ImageDecoder - BMP, JPEG, JPEG 2000, TIFF, PNG, WebP, PNM through Pillow (imported when
  a node is prepared); ``pixel_format`` RGB / BGR / Grayscale; an undecodable stream gives an
  empty (0, 0, C) uint8 tensor, as the definition says.  Its output size, H x W x C octets, is
  read from the header and declared (``declares_output_bytes``): an image larger than the
  limits is refused before it is decoded.
* NonMaxSuppression - greedy per (batch, class): candidates above
  ``score_threshold`` (strictly), highest score first (ties: lower box index first), a box
  is dropped when its IOU with a kept box is strictly greater than ``iou_threshold``;
  ``center_point_box`` 0 (corners, either order) or 1 (centre, size).  The IOU of every
  pair is computed at once; the loop runs once per kept box.
"""

from __future__ import annotations

import io
import warnings

import numpy as np

from onnxkit.plugin import KernelTable, declares_output_bytes

KERNELS = KernelTable()


@KERNELS.register("ImageDecoder", 20, host_only=True)
def image_decoder(ctx):
    fmt = ctx.attr_str("pixel_format")
    if fmt not in ("RGB", "BGR", "Grayscale"):
        ctx.fail(f"unknown pixel_format {fmt!r}")
    try:
        import PIL.Image
    except ImportError:  # pragma: no cover - Pillow is a dependency of onnxkit-default-domain
        ctx.fail("ImageDecoder needs Pillow")
    channels = 1 if fmt == "Grayscale" else 3

    def run(encoded):
        data = np.ascontiguousarray(encoded, dtype=np.uint8).tobytes()
        try:
            with PIL.Image.open(io.BytesIO(data)) as img:
                img = img.convert("L" if fmt == "Grayscale" else "RGB")
                arr = np.asarray(img, dtype=np.uint8)
        except Exception:  # noqa: BLE001 - any decoding failure is an empty result by definition
            return np.zeros((0, 0, channels), dtype=np.uint8)
        if fmt == "Grayscale":
            return arr[:, :, None].copy()
        return np.ascontiguousarray(arr[:, :, ::-1] if fmt == "BGR" else arr)

    def size(encoded):
        """H x W x C octets from the image's header alone (Pillow opens lazily: nothing decoded)."""
        data = np.ascontiguousarray(encoded, dtype=np.uint8).tobytes()
        try:
            with warnings.catch_warnings():  # a "decompression bomb" is what the limits judge here
                warnings.simplefilter("ignore", PIL.Image.DecompressionBombWarning)
                with PIL.Image.open(io.BytesIO(data)) as img:
                    width, height = img.size
        except Exception:  # noqa: BLE001 - undecodable: the (0, 0, C) result
            return 0
        return int(width) * int(height) * channels

    return declares_output_bytes(run, size)


def _corners(boxes, center):
    b = boxes.astype(np.float64)
    if center:
        hw, hh = b[:, 2] / 2, b[:, 3] / 2
        return b[:, 0] - hw, b[:, 0] + hw, b[:, 1] - hh, b[:, 1] + hh
    y0, x0, y1, x1 = b[:, 0], b[:, 1], b[:, 2], b[:, 3]
    return np.minimum(x0, x1), np.maximum(x0, x1), np.minimum(y0, y1), np.maximum(y0, y1)


def _iou_matrix(boxes, center):
    xmin, xmax, ymin, ymax = _corners(boxes, center)
    iw = np.minimum(xmax[:, None], xmax[None, :]) - np.maximum(xmin[:, None], xmin[None, :])
    ih = np.minimum(ymax[:, None], ymax[None, :]) - np.maximum(ymin[:, None], ymin[None, :])
    inter = np.where((iw > 0) & (ih > 0), iw * ih, 0.0)
    area = (xmax - xmin) * (ymax - ymin)
    union = area[:, None] + area[None, :] - inter
    ok = (inter > 0) & (area[:, None] > 0) & (area[None, :] > 0) & (union > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(ok, inter / np.where(union > 0, union, 1), 0.0), ok


@KERNELS.register("NonMaxSuppression", 10, 11, host_only=True)
def non_max_suppression(ctx):
    center = int(ctx.attr("center_point_box"))
    if center not in (0, 1):
        ctx.fail(f"center_point_box must be 0 or 1, got {center}")

    def scalar(v, default, cast):
        if v is None or np.asarray(v).size == 0:
            return default
        return cast(np.asarray(v).reshape(-1)[0])

    def run(boxes, scores, max_output_boxes_per_class=None, iou_threshold=None, score_threshold=None):
        if boxes.ndim != 3 or boxes.shape[2] != 4 or scores.ndim != 3:
            ctx.fail(f"boxes must be (B, N, 4) and scores (B, C, N), got {boxes.shape} and {scores.shape}")
        nb, nbox = boxes.shape[:2]
        if scores.shape[0] != nb or scores.shape[2] != nbox:
            ctx.fail(f"scores {scores.shape} do not match boxes {boxes.shape}")
        limit = max(scalar(max_output_boxes_per_class, 0, int), 0)
        iou_thr = scalar(iou_threshold, 0.0, float)
        has_score_thr = score_threshold is not None and np.asarray(score_threshold).size > 0
        score_thr = scalar(score_threshold, 0.0, float)
        out = []
        if limit == 0:
            return np.zeros((0, 3), dtype=np.int64)
        for b in range(nb):
            iou, _ = _iou_matrix(boxes[b], center)
            suppress = iou > iou_thr
            for c in range(scores.shape[1]):
                sc = scores[b, c].astype(np.float64)
                cand = np.flatnonzero(sc > score_thr) if has_score_thr else np.arange(nbox)
                order = cand[np.argsort(-sc[cand], kind="stable")]
                alive = np.ones(nbox, dtype=bool)
                kept = 0
                for i in order:
                    if kept >= limit:
                        break
                    if not alive[i]:
                        continue
                    out.append((b, c, i))
                    kept += 1
                    alive &= ~suppress[i]
        return np.array(out, dtype=np.int64).reshape(-1, 3)

    return run
