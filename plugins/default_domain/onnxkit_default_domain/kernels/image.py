"""Image operators of ai.onnx: ImageDecoder and NonMaxSuppression (host_only: Pillow decodes
images, and the greedy suppression runs over numpy arrays; the gpu backend runs these nodes on
its cpu fallback).

* ImageDecoder - BMP, JPEG, JPEG 2000, TIFF, PNG, WebP, PNM through Pillow (imported when
  a node is prepared); ``pixel_format`` RGB / BGR / Grayscale; an undecodable stream gives an
  empty (0, 0, C) uint8 tensor, as the definition says.  Its output size, H x W x C octets, is
  read from the header and declared (``declares_output_bytes``): an image larger than the
  limits is refused before it is decoded.
* NonMaxSuppression - greedy per (batch, class), as onnxruntime computes it: candidates above
  ``score_threshold`` (strictly; every box when the input is absent), highest score first, ties
  by the lower box index; a candidate is dropped when its IOU with a box kept before it in the
  class is strictly greater than ``iou_threshold``; at most ``max_output_boxes_per_class`` kept
  (absent or <= 0: none); ``iou_threshold`` outside [0, 1] is an error.  Boxes are
  ``center_point_box`` 0 (two corners, either order) or 1 (centre, size).  The arithmetic is
  float32 in onnxruntime's order (:func:`box_planes`, :func:`suppressed`), so an IOU that rounds
  to the threshold is decided as there; a NaN coordinate never suppresses.  NaN scores (no score
  threshold) have no order: the candidates then leave a binary heap as libstdc++'s
  ``priority_queue`` pops them (:func:`heap_order`), the order onnxruntime's Linux build gives.
  Each class' candidates are sorted once and the classes of a batch run side by side
  (:func:`nms_classes`): each step keeps every class' next live candidate and suppresses the
  later ones at once (one vectorized IOU per step).  The cpu backend runs the same rules
  compiled (onnxkit_cpu/overrides/image.py).
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


def box_planes(boxes, center: int):
    """``(ymin, xmin, ymax, xmax, area)`` float32 planes of (N, 4) boxes as onnxruntime forms them:
    corners ordered by ``a >= b ? (b, a) : (a, b)`` per axis, centre boxes ``c -/+ size / 2``; the
    area is ``(ymax - ymin) * (xmax - xmin)`` of those planes in both formats (for a centre box
    not ``w * h``: they differ by rounding, and where a coordinate is NaN)."""
    b = np.asarray(boxes, dtype=np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        if center:
            hw, hh = b[:, 2] / np.float32(2), b[:, 3] / np.float32(2)
            ymin, xmin, ymax, xmax = b[:, 1] - hh, b[:, 0] - hw, b[:, 1] + hh, b[:, 0] + hw
        else:
            y0, x0, y1, x1 = b[:, 0], b[:, 1], b[:, 2], b[:, 3]
            ys, xs = y0 >= y1, x0 >= x1
            ymin, ymax = np.where(ys, y1, y0), np.where(ys, y0, y1)
            xmin, xmax = np.where(xs, x1, x0), np.where(xs, x0, x1)
        return ymin, xmin, ymax, xmax, (ymax - ymin) * (xmax - xmin)


def suppressed(planes, cand, kept, iou_thr):
    """Whether each candidate box ``cand`` (indices into ``planes``) has an IOU with box ``kept``
    (an index, or indices broadcasting with ``cand``) strictly above ``iou_thr`` (float32): the
    intersection's bounds are ``max(c, k) = c < k ? k : c`` and ``min(c, k) = k < c ? k : c`` (a
    NaN bound of the kept box drops out there, as in C++), an empty or NaN overlap never
    suppresses, the union is ``area_c + area_k - inter``."""
    return pair_suppressed([p[cand] for p in planes], [p[kept] for p in planes], iou_thr)


def pair_suppressed(c, k, iou_thr):
    """:func:`suppressed` of candidate planes ``c`` and kept planes ``k`` (lists of
    ``(ymin, xmin, ymax, xmax, area)`` arrays that broadcast together)."""
    cy0, cx0, cy1, cx1, ca = c
    ky0, kx0, ky1, kx1, ka = k
    ix0, ix1 = np.where(cx0 < kx0, kx0, cx0), np.where(kx1 < cx1, kx1, cx1)
    iy0, iy1 = np.where(cy0 < ky0, ky0, cy0), np.where(ky1 < cy1, ky1, cy1)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        inter = (ix1 - ix0) * (iy1 - iy0)
        iou = inter / (ca + ka - inter)
        return (ix1 > ix0) & (iy1 > iy0) & (inter > 0) & (iou > iou_thr)


def _before(si, ii, sj, ij) -> bool:
    """onnxruntime's candidate order as a "less than" (the heap's top is its greatest):
    a lower score, or an equal score and a higher index (NaN compares false)."""
    return si < sj or (si == sj and ii > ij)


def heap_order(scores, index):
    """The order in which libstdc++'s ``priority_queue`` (``make_heap``, then ``pop_heap`` per
    pop) yields the candidates ``(scores[i], index[i])`` under :func:`_before`: for distinct
    comparable scores the sorted order; with NaN scores (no consistent order) the heap's own."""
    s, ix = [float(v) for v in scores], [int(v) for v in index]
    n = len(s)

    def sift(hole, length, vs, vi):
        top, child = hole, hole
        while child < (length - 1) // 2:
            child = 2 * (child + 1)
            if _before(s[child], ix[child], s[child - 1], ix[child - 1]):
                child -= 1
            s[hole], ix[hole] = s[child], ix[child]
            hole = child
        if length % 2 == 0 and child == (length - 2) // 2:
            child = 2 * (child + 1)
            s[hole], ix[hole] = s[child - 1], ix[child - 1]
            hole = child - 1
        parent = (hole - 1) // 2
        while hole > top and _before(s[parent], ix[parent], vs, vi):
            s[hole], ix[hole] = s[parent], ix[parent]
            hole, parent = parent, (parent - 1) // 2
        s[hole], ix[hole] = vs, vi

    if n >= 2:
        for parent in range((n - 2) // 2, -1, -1):
            sift(parent, n, s[parent], ix[parent])
    out = []
    for last in range(n - 1, -1, -1):
        out.append(ix[0])
        if last > 0:
            vs, vi = s[last], ix[last]
            s[last], ix[last] = s[0], ix[0]
            sift(0, last, vs, vi)
    return np.array(out, dtype=np.int64)


def nms_arguments(ctx, boxes, scores, max_output_boxes_per_class, iou_threshold, score_threshold):
    """``(limit, iou threshold, score threshold or None)`` after the shape checks onnxruntime makes
    (boxes (B, N, 4), scores (B, C, N)); the thresholds float32 scalars."""
    if boxes.ndim != 3 or boxes.shape[2] != 4 or scores.ndim != 3:
        ctx.fail(f"boxes must be (B, N, 4) and scores (B, C, N), got {boxes.shape} and {scores.shape}")
    if scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1]:
        ctx.fail(f"scores {scores.shape} do not match boxes {boxes.shape}")

    def scalar(v, cast):
        return None if v is None or np.asarray(v).size == 0 else cast(np.asarray(v).reshape(-1)[0])

    limit = max(scalar(max_output_boxes_per_class, int) or 0, 0)
    iou_thr = scalar(iou_threshold, np.float32)
    iou_thr = np.float32(0) if iou_thr is None else iou_thr
    if not 0 <= iou_thr <= 1:
        ctx.fail(f"iou_threshold must be in [0, 1], got {float(iou_thr)}")
    return limit, iou_thr, scalar(score_threshold, np.float32)


def nms_class(planes, sc, limit: int, iou_thr, score_thr):
    """The kept box indices of one (batch, class): ``sc`` its float32 scores (N,)."""
    cand = np.arange(sc.shape[0]) if score_thr is None else np.flatnonzero(sc > score_thr)
    csc = sc[cand]
    if np.isnan(csc).any():
        order = heap_order(csc, cand)
    else:
        order = cand[np.argsort(-csc, kind="stable")]
    alive = np.ones(order.shape[0], dtype=bool)
    kept, pos = [], 0
    while len(kept) < limit:
        rest = alive[pos:]
        if not rest.any():
            break
        pos += int(rest.argmax())
        k = int(order[pos])
        kept.append(k)
        pos += 1
        if pos < order.shape[0] and len(kept) < limit:
            alive[pos:] &= ~suppressed(planes, order[pos:], k, iou_thr)
    return kept


def nms_classes(planes, sc, limit: int, iou_thr, score_thr):
    """``(classes, boxes)`` kept in one batch, class by class, each class' boxes in the order kept:
    ``sc`` its (C, N) float32 scores.  The classes run side by side: their candidates padded into
    (C, M) rows in their order (score, then index), each step keeps every class' first live
    candidate and suppresses the later ones of its row at once (one vectorized IOU per step).
    A class with a NaN candidate score runs alone (:func:`nms_class`: the heap's order)."""
    ncls, n = sc.shape
    mask = np.ones(sc.shape, dtype=bool) if score_thr is None else sc > score_thr
    nan = (np.isnan(sc) & mask).any(1)
    mask[nan] = False
    rows, cols = np.nonzero(mask)
    counts = np.bincount(rows, minlength=ncls)
    width = int(counts.max(initial=0))
    cls_out, box_out = [], []
    if width:
        slot = np.arange(rows.shape[0]) - np.repeat(np.cumsum(counts) - counts, counts)
        idx = np.zeros((ncls, width), dtype=np.int64)
        key = np.zeros((ncls, width), dtype=np.float32)
        pad = np.ones((ncls, width), dtype=bool)
        idx[rows, slot], key[rows, slot], pad[rows, slot] = cols, -sc[rows, cols], False
        order = np.lexsort((key, pad), axis=-1)          # candidates first, by score, ties by index
        idx, alive = np.take_along_axis(idx, order, 1), ~np.take_along_axis(pad, order, 1)
        cand = [p[idx] for p in planes]                  # (C, M) planes of the candidates, in order
        kept = np.zeros(ncls, dtype=np.int64)
        while True:
            live = np.flatnonzero(alive.any(1))
            if live.size == 0:
                break
            pos = alive[live].argmax(1)
            cls_out.append(live)
            box_out.append(idx[live, pos])
            alive[live, pos] = False
            kept[live] += 1
            more = kept[live] < limit
            alive[live[~more]] = False
            go, at = live[more], pos[more]
            if go.size:
                alive[go] &= ~pair_suppressed([q[go] for q in cand], [q[go, at][:, None] for q in cand], iou_thr)
    for c in np.flatnonzero(nan):
        kept_c = nms_class(planes, sc[c], limit, iou_thr, score_thr)
        cls_out.append(np.full(len(kept_c), c, dtype=np.int64))
        box_out.append(np.array(kept_c, dtype=np.int64))
    if not cls_out:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    cls, box = np.concatenate(cls_out), np.concatenate(box_out)
    by_class = np.argsort(cls, kind="stable")            # steps in order within each class
    return cls[by_class], box[by_class]


@KERNELS.register("NonMaxSuppression", 10, 11, host_only=True)
def non_max_suppression(ctx):
    center = int(ctx.attr("center_point_box"))
    if center not in (0, 1):
        ctx.fail(f"center_point_box must be 0 or 1, got {center}")

    def run(boxes, scores, max_output_boxes_per_class=None, iou_threshold=None, score_threshold=None):
        limit, iou_thr, score_thr = nms_arguments(ctx, boxes, scores, max_output_boxes_per_class,
                                                  iou_threshold, score_threshold)
        if limit == 0:
            return np.zeros((0, 3), dtype=np.int64)
        sc_all = np.asarray(scores, dtype=np.float32)
        out = []
        for b in range(boxes.shape[0]):
            cls, box = nms_classes(box_planes(boxes[b], center), sc_all[b], limit, iou_thr, score_thr)
            out.append(np.stack([np.full(cls.shape, b), cls, box], 1))
        return np.concatenate(out).astype(np.int64, copy=False) if out else np.zeros((0, 3), dtype=np.int64)

    return run
