"""The data-dependent operators at real sizes: onnxkit-cpu against onnxruntime 1.32, one thread each.

Each case is a one-node model whose data inputs are graph inputs (nothing folded): NonMaxSuppression
of a YOLOv8-like head and its variants, TopK, NonZero, Unique, RoiAlign, Resize with a large output,
ScatterND / GatherND / GatherElements, Compress, CumSum, Einsum.  For each, the outputs are checked
equal to onnxruntime's (exactly for indices and selections, within Clause 11's tolerances for
arithmetic), then onnxkit (its warm plan: the compiled loops), onnxkit's portable kernels (the node
planned under ``onnxkit_cpu.compiled.disabled()``, ``--portable``) and onnxruntime are timed
interleaved (``timing.interleaved_samples``) and their medians printed with the ratio onnxkit /
onnxruntime (issue 44's bar: 2x).  BLAS and onnxruntime run one thread (``OMP_NUM_THREADS``,
``OPENBLAS_NUM_THREADS``, ``intra_op_num_threads`` = 1).

    python benchmarks/data_dependent.py                 # every case
    python benchmarks/data_dependent.py nms topk        # the cases whose name contains a word
    python benchmarks/data_dependent.py --portable --repeat 9
"""

from __future__ import annotations

import argparse
import os
import platform
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
    tol = tolerance_for(b.dtype)
    return bool(np.all((np.abs(a.astype(np.float64) - b) <= tol.atol + tol.rtol * np.abs(b)) |
                       (np.isnan(a) & np.isnan(b))))


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
    print(f"{'case':34} {'onnxkit':>9} {'portable':>9} {'ort':>9} {'ratio':>6}  conditions")
    worst = 0.0
    for name, op, opset, ins, attrs, cond in cases():
        if args.words and not any(w in name for w in args.words):
            continue
        out_types = attrs.pop("_out", [ins[0][1]])     # the outputs' element types (default: the first input's)
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
                if not all(same(g, w) for g, w in zip(got, want)):
                    print(f"{name}: {k}'s outputs differ from onnxruntime's", file=sys.stderr)
                    return 1
        m = medians(interleaved_samples(fns, repeat=args.repeat))
        ratio = m["onnxkit"] / m["ort"]
        worst = max(worst, ratio)
        port_ms = f"{m['portable'] * 1e3:9.2f}" if "portable" in m else f"{'-':>9}"
        print(f"{name:34} {m['onnxkit'] * 1e3:9.2f} {port_ms} {m['ort'] * 1e3:9.2f} {ratio:6.2f}  {cond}", flush=True)
    print(f"# worst ratio {worst:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
