"""The gpu backend's device check, the Python half of ``benchmarks/gpu_check.sh`` (issue #13).

Prints the torch device the gpu backend runs on, the outcome counts of the node and light
vectors on ``gpu`` (and how many node vectors run at least one node on the cpu fallback), and a
speed table: a few light models, median of ``--repeat`` runs on the gpu and on the cpu backend.
Exit status 1 when a vector fails, is unsupported, or errors for another reason than the feed
check's dimension-variable rule (Clause 6.5.2, which refuses the 8 ``test_sequence_map_*``
vectors on every backend); 2 when the device asked for is not there.

``--vectors DIR``: the ONNX 1-3 test package (default: made from the installed ``onnx`` by
``tests/onnx_vectors.py``).  ``--models a,b``: the light models timed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from timing import median_of

REPO = Path(__file__).resolve().parent.parent
DEFAULT_MODELS = "squeezenet,shufflenet,resnet50,inception_v1"


def _vectors(arg) -> Path:
    if arg:
        return Path(arg)
    sys.path.insert(0, str(REPO / "tests"))
    from onnx_vectors import ensure_vectors

    return ensure_vectors()


def _conformance(root: Path) -> int:
    import onnxkit
    from onnxkit.conformance import discover, run_all, summary

    bad = 0
    for sub in ("node", "light"):
        cases = discover(root / sub)
        outcomes = run_all(cases, "gpu", progress=False)
        counts = summary(outcomes)
        wrong = [o for o in outcomes if o.status in ("fail", "unsupported")
                 or (o.status == "error" and "6.5.2" not in o.message)]
        line = f"{sub} vectors on gpu: {counts['pass']}/{len(cases)} pass  {counts}"
        if sub == "node":
            with_fallback = 0
            for c in cases:
                try:
                    with_fallback += bool(onnxkit.InferenceSession(onnxkit.load(c.model), "gpu").fallbacks)
                except onnxkit.errors.OnnxkitError:
                    pass
            line += f"  ({with_fallback} run at least one node on the cpu fallback)"
        print(line)
        for o in wrong:
            print(f"  {o.status}: {sub}/{o.name}: {o.message[:300]}")
        bad += len(wrong)
    return bad


def _speed(root: Path, names, repeat: int) -> None:
    import onnxkit
    from onnxkit.conformance import dummy_input

    print(f"\nspeed, median of {repeat} (after one warm-up), seconds per inference")
    print(f"  {'model':16s} {'gpu':>9s} {'cpu':>9s} {'cpu/gpu':>8s}")
    for name in names:
        path = root / "light" / f"light_{name}.onnx"
        if not path.exists():
            print(f"  {name:16s} (no such light model)")
            continue
        model = onnxkit.load(path)
        init = {t.name for t in model.graph.initializer}
        feed = {vi.name: dummy_input(vi) for vi in model.graph.input if vi.name not in init}
        times = {}
        for backend in ("gpu", "cpu"):
            sess = onnxkit.InferenceSession(model, backend)
            times[backend] = median_of(lambda: sess.run(None, feed), repeat)
        print(f"  {name:16s} {times['gpu']:9.4f} {times['cpu']:9.4f} {times['cpu'] / times['gpu']:8.2f}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--vectors", default=None)
    parser.add_argument("--models", default=DEFAULT_MODELS)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    import torch

    import onnxkit
    from onnxkit_gpu.device import device

    try:
        dev = device()
    except onnxkit.errors.OnnxkitError as exc:
        print(f"gpu_check: {exc}", file=sys.stderr)
        return 2
    name = torch.cuda.get_device_name(torch.device(dev)) if dev.startswith("cuda") else "torch's CPU device"
    print(f"gpu backend device: {dev} ({name}); torch {torch.__version__}")
    root = _vectors(args.vectors)
    bad = _conformance(root)
    _speed(root, [m for m in args.models.split(",") if m], args.repeat)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
