"""The data-dependent operators at real sizes: onnxkit-cpu against onnxruntime 1.32, one thread each.

Each case is a one-node model whose data inputs are graph inputs (nothing folded): NonMaxSuppression
of a YOLOv8-like head and its variants, TopK, NonZero, Unique, RoiAlign, Resize with a large output,
ScatterND / GatherND / GatherElements, Compress, CumSum, Einsum.  For each, the outputs are checked
equal to onnxruntime's (exactly for indices and selections, within Clause 11's tolerances for
arithmetic), then onnxkit (its warm plan: the compiled loops), onnxkit without compiled loops (the
node planned under ``onnxkit_cpu.compiled.disabled()``, ``--portable``: the portable kernel, or the
cpu override's numpy body where it has one: a cold plan's or a numba-less install's) and onnxruntime
are timed interleaved (``timing.interleaved_samples``) and their medians printed with the ratio
onnxkit / onnxruntime (issue 44's bar: 2x), and the ratio of their CPU times (median of each
timing's wall time times its CPU share: on a loaded host a longer call is more often preempted,
and the wall-time ratio then overstates the work).  Arithmetic outputs are compared with Clause 11's
relative tolerance and an absolute one of 1e-5 of the output's largest magnitude (sums in another
order).  BLAS and onnxruntime run one thread (``OMP_NUM_THREADS``,
``OPENBLAS_NUM_THREADS``, ``intra_op_num_threads`` = 1).

    python benchmarks/data_dependent.py                 # every case
    python benchmarks/data_dependent.py nms topk        # the cases whose name contains a word
    python benchmarks/data_dependent.py --portable --repeat 9
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import warnings

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

from timing import interleaved_samples, medians  # noqa: E402

RNG = np.random.default_rng(44)
F, I64 = 1, 7            # TensorProto.FLOAT, INT64


def _yolo(n=8400, classes=80, center=1, few=True):
    """Boxes of a YOLOv8 head (centre, size in a 640 image) and sigmoid-like class scores: most
    near 0, a few objects per image (``few``) or uniform scores (every box a candidate)."""
    xy = RNG.random((1, n, 2)) * 640
    wh = 8 + RNG.random((1, n, 2)) * 120
    boxes = np.concatenate([xy, wh], -1) if center else np.concatenate([xy[..., ::-1] - wh[..., ::-1] / 2,
                                                                         xy[..., ::-1] + wh[..., ::-1] / 2], -1)
    scores = RNG.random((1, classes, n)) ** (12 if few else 1)
    return boxes.astype(np.float32), scores.astype(np.float32)


def _nms(name, n, classes, center, few, limit, iou, score):
    boxes, scores = _yolo(n, classes, center, few)
    ins = [("boxes", F, boxes), ("scores", F, scores), ("max_output_boxes_per_class", I64, np.int64([limit])),
           ("iou_threshold", F, np.float32([iou]))]
    if score is not None:
        ins.append(("score_threshold", F, np.float32([score])))
    cond = f"B=1 C={classes} N={n} center_point_box={center} limit={limit} iou={iou} score_threshold={score}"
    return name, "NonMaxSuppression", 11, ins, {"center_point_box": center, "_out": [I64]}, cond


def cases():
    """``(name, op, opset, [(input, element type, value)], attributes, conditions)`` per case; the
    attribute ``_out`` (not the node's) lists the outputs' element types where they are not the
    first input's."""
    yield _nms("nms-yolov8", 8400, 80, 1, True, 100, 0.45, 0.25)
    yield _nms("nms-yolov8-corners", 8400, 80, 0, True, 100, 0.45, 0.25)
    yield _nms("nms-many-boxes-few-survivors", 8400, 4, 1, False, 100, 0.05, 0.01)
    yield _nms("nms-no-score-threshold", 8400, 4, 1, False, 300, 0.5, None)
    yield _nms("nms-few-boxes", 100, 20, 0, False, 10, 0.5, 0.2)
    x = RNG.standard_normal((1, 100_000)).astype(np.float32)
    ties = RNG.integers(0, 100, (1, 100_000)).astype(np.float32)
    for name, v, k, srt in (("topk-large-k-sorted", x, 10_000, 1), ("topk-large-k-unsorted", x, 10_000, 0),
                            ("topk-half-ties", ties, 50_000, 1), ("topk-k100-ties", ties, 100, 1)):
        yield name, "TopK", 11, [("x", F, v), ("k", I64, np.int64([k]))], \
            {"sorted": srt, "_out": [F, I64], "_unordered": not srt}, f"X {v.shape} float32 axis -1 K={k} sorted={srt}"
    rows = RNG.standard_normal((64, 8400)).astype(np.float32)
    yield "topk-rows-k100", "TopK", 11, [("x", F, rows), ("k", I64, np.int64([100]))], \
        {"_out": [F, I64]}, "X (64, 8400) float32 axis -1 K=100 sorted=1"
    mask = (RNG.random((1, 80, 8400)) < 0.1).astype(np.float32)
    yield "nonzero-10pc", "NonZero", 13, [("x", F, mask)], {"_out": [I64]}, "X (1, 80, 8400) float32, 10% nonzero"
    ids = RNG.integers(0, 1000, 1_000_000).astype(np.int64)
    yield "unique-int64-sorted", "Unique", 11, [("x", I64, ids)], {"sorted": 1, "_out": [I64] * 4}, \
        "X (1e6,) int64, 1,000 distinct, sorted=1, four outputs"
    fl = RNG.integers(0, 5000, 200_000).astype(np.float32)
    yield "unique-float-unsorted", "Unique", 11, [("x", F, fl)], {"sorted": 0, "_out": [F, I64, I64, I64]}, \
        "X (2e5,) float32, 5,000 distinct, sorted=0, four outputs"
    feat = RNG.standard_normal((1, 256, 64, 64)).astype(np.float32)
    xy = RNG.random((300, 2)) * 48
    rois = np.concatenate([xy, xy + 4 + RNG.random((300, 2)) * 12], 1).astype(np.float32)
    yield "roialign-300", "RoiAlign", 16, [("x", F, feat), ("rois", F, rois), ("batch", I64, np.zeros(300, np.int64))], \
        {"output_height": 7, "output_width": 7, "sampling_ratio": 2, "spatial_scale": 1.0}, \
        "X (1, 256, 64, 64), 300 rois, 7x7, sampling_ratio 2, avg, half_pixel"
    img = RNG.random((1, 3, 640, 640)).astype(np.float32)
    yield "resize-linear-2x", "Resize", 19, [("x", F, img), ("roi", F, np.zeros(0, np.float32)),
                                             ("scales", F, np.float32([1, 1, 2, 2]))], {"mode": "linear"}, \
        "X (1, 3, 640, 640) -> (1, 3, 1280, 1280) linear half_pixel"
    fm = RNG.random((1, 64, 160, 160)).astype(np.float32)
    yield "resize-nearest-2x", "Resize", 19, [("x", F, fm), ("roi", F, np.zeros(0, np.float32)),
                                              ("scales", F, np.float32([1, 1, 2, 2]))], {"mode": "nearest"}, \
        "X (1, 64, 160, 160) -> (1, 64, 320, 320) nearest"
    data = RNG.standard_normal((1_000_000,)).astype(np.float32)
    idx = RNG.permutation(1_000_000)[:100_000].astype(np.int64)[:, None]
    yield "scatternd-elements", "ScatterND", 18, [("x", F, data), ("i", I64, idx),
                                                  ("u", F, RNG.standard_normal(100_000).astype(np.float32))], {}, \
        "data (1e6,), 1e5 distinct element indices, reduction none"
    cache = RNG.standard_normal((64, 1024, 64)).astype(np.float32)
    yield "scatternd-rows-add", "ScatterND", 18, [("x", F, cache), ("i", I64, RNG.integers(0, 64, (256, 1))),
                                                  ("u", F, RNG.standard_normal((256, 1024, 64)).astype(np.float32))], \
        {"reduction": "add"}, "data (64, 1024, 64), 256 row indices with duplicates, reduction add"
    src = RNG.standard_normal((8, 1024, 256)).astype(np.float32)
    yield "gathernd-batch", "GatherND", 13, [("x", F, src), ("i", I64, RNG.integers(0, 1024, (8, 1000, 1)))], \
        {"batch_dims": 1}, "data (8, 1024, 256), indices (8, 1000, 1), batch_dims 1"
    pts = np.stack([RNG.integers(0, 1024, 200_000), RNG.integers(0, 256, 200_000)], 1)
    yield "gathernd-points", "GatherND", 13, [("x", F, src[0]), ("i", I64, pts)], {}, \
        "data (1024, 256), indices (2e5, 2): single elements"
    yield "gatherelements-rows", "GatherElements", 13, [("x", F, rows),
                                                        ("i", I64, RNG.integers(0, 8400, (64, 100)))], {"axis": 1}, \
        "data (64, 8400), indices (64, 100), axis 1"
    big = RNG.standard_normal((1000, 1000)).astype(np.float32)
    yield "gatherelements-full-axis0", "GatherElements", 13, [("x", F, big),
                                                              ("i", I64, RNG.integers(-1000, 1000, (1000, 1000)))], \
        {"axis": 0}, "data (1000, 1000), indices (1000, 1000) incl. negative, axis 0"
    pred = RNG.standard_normal((8400, 84)).astype(np.float32)
    yield "compress-rows", "Compress", 11, [("x", F, pred), ("c", 9, RNG.random(8400) < 0.05)], {"axis": 0}, \
        "X (8400, 84), 5% of rows, axis 0"
    yield "compress-flat", "Compress", 11, [("x", F, big), ("c", 9, RNG.random(1_000_000) < 0.5)], {}, \
        "X (1000, 1000) flattened, half the elements"
    line = RNG.standard_normal((1, 1_000_000)).astype(np.float32)
    yield "cumsum-long", "CumSum", 14, [("x", F, line), ("a", I64, np.array(1, np.int64))], {}, "X (1, 1e6) float32 axis 1"
    yield "cumsum-rows-excl-rev", "CumSum", 14, [("x", F, RNG.standard_normal((256, 4096)).astype(np.float32)),
                                                 ("a", I64, np.array(1, np.int64))], {"exclusive": 1, "reverse": 1}, \
        "X (256, 4096) float32 axis 1 exclusive reverse"
    q = RNG.standard_normal((1, 8, 256, 64)).astype(np.float32)
    yield "einsum-attention", "Einsum", 12, [("a", F, q), ("b", F, q)], {"equation": "bhid,bhjd->bhij"}, \
        "bhid,bhjd->bhij (1, 8, 256, 64) x2"
    yield "einsum-transpose-sum", "Einsum", 12, [("a", F, q)], {"equation": "bhid->bdh"}, \
        "bhid->bdh (1, 8, 256, 64)"
    yield "einsum-bilinear", "Einsum", 12, [("a", F, big[:256, :64].copy()), ("w", F, q[0, :4, :64, :64].copy()),
                                            ("b", F, big[256:512, :64].copy())], {"equation": "bi,oij,bj->bo"}, \
        "bi,oij,bj->bo (256, 64) (4, 64, 64) (256, 64)"


def model(op, opset, ins, attrs, out_types):
    from onnx import helper

    vis = [helper.make_tensor_value_info(n, t, None) for n, t, _ in ins]
    outs = [helper.make_tensor_value_info(f"y{i}", t, None) for i, t in enumerate(out_types)]
    node = helper.make_node(op, [n for n, _, _ in ins], [o.name for o in outs], **attrs)
    g = helper.make_graph([node], op, vis, outs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8).SerializeToString()


def same(a, b) -> bool:
    from onnxkit.tolerances import tolerance_for

    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if b.dtype.kind != "f":
        return bool(np.array_equal(a, b))
    tol = tolerance_for(b.dtype)     # sums in another order: an absolute part scaled to the output's largest value
    atol = max(tol.atol, 1e-5 * float(np.nanmax(np.abs(b), initial=0)))
    return bool(np.all((np.abs(a.astype(np.float64) - b) <= atol + tol.rtol * np.abs(b)) |
                       (np.isnan(a) & np.isnan(b))))


def _by_index(outputs):
    """TopK's ``(values, indices)`` each put in the order of the indices along the last axis."""
    order = np.argsort(outputs[1], axis=-1, kind="stable")
    return [np.take_along_axis(o, order, -1) for o in outputs]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("words", nargs="*", help="run the cases whose name contains one of these")
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--portable", action="store_true", help="also time the portable kernels")
    args = p.parse_args()

    import onnxruntime as ort

    from onnxkit.runtime import InferenceSession
    from onnxkit_cpu import compiled

    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; onnxruntime {ort.__version__}, "
          f"one thread each; interleaved medians of {args.repeat}; times in ms")
    print(f"{'case':34} {'onnxkit':>9} {'no-numba':>9} {'ort':>9} {'ratio':>6} {'cpu':>6}  conditions")
    worst, failed = 0.0, 0
    for name, op, opset, ins, attrs, cond in cases():
        if args.words and not any(w in name for w in args.words):
            continue
        out_types = attrs.pop("_out", [ins[0][1]])     # the outputs' element types (default: the first input's)
        unordered = attrs.pop("_unordered", False)     # TopK sorted=0: the order is unspecified
        data = model(op, opset, ins, attrs, out_types)
        feeds = {n: v for n, _, v in ins}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kit = InferenceSession(data, validate=False)
            fns = {"onnxkit": lambda: kit.run(None, feeds)}
            if args.portable:
                with compiled.disabled():
                    port = InferenceSession(data, validate=False)
                fns["portable"] = lambda: port.run(None, feeds)
        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        sess = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
        fns["ort"] = lambda: sess.run(None, feeds)
        want = fns["ort"]()
        for k in fns:
            if k != "ort":
                got = fns[k]()
                if unordered:                          # values and indices compared as sets (by index)
                    got, want = _by_index(got), _by_index(want)
                if not all(same(g, w) for g, w in zip(got, want)):
                    print(f"{name}: {k}'s outputs differ from onnxruntime's", file=sys.stderr)
                    failed = 1
        samples = interleaved_samples(fns, repeat=args.repeat)
        m = medians(samples)
        cpu = {k: statistics.median(w * c for w, c in v) for k, v in samples.items()}
        ratio = m["onnxkit"] / m["ort"]
        worst = max(worst, ratio)
        port_ms = f"{m['portable'] * 1e3:9.2f}" if "portable" in m else f"{'-':>9}"
        print(f"{name:34} {m['onnxkit'] * 1e3:9.2f} {port_ms} {m['ort'] * 1e3:9.2f} {ratio:6.2f} "
              f"{cpu['onnxkit'] / cpu['ort']:6.2f}  {cond}", flush=True)
    print(f"# worst ratio {worst:.2f}")
    return failed


if __name__ == "__main__":
    sys.exit(main())
