"""Run onnxsim and onnxslim over the corpus with onnxruntime and with onnxkit standing in for it,
and compare the files they write.

    python tools/model_tools_check.py [--tools onnxsim,onnxslim] [--check N] [--timeout S] [MODEL ...]

Both tools call onnxruntime's Python API while they work: onnxsim folds constants by running
parts of the graph (``InferenceSession`` + ``run``) and checks the result on random inputs
(``--check N``, its ``check_n``, fed the corpus model's fixed inputs); onnxslim folds constants through onnx-graphsurgeon's
``fold_constants``, which runs the foldable subgraph.  Each (model, tool, side) runs in its own
process (``python tools/model_tools_check.py --one TOOL SIDE SRC DST``): ``onnxruntime`` imports
the installed onnxruntime, ``onnxkit`` calls :func:`onnxkit.install_as_onnxruntime` before the tool
is imported.  The child counts the sessions the tool made and runs, so that a run that never
reached the runtime is visible.  Per model and tool the verdict is:

* ``equal``: the two written files are the same octets;
* ``differs``: they are not; the first difference found is named (a node, an initializer and its
  largest absolute difference, or the graph's other fields);
* ``fails``: a side failed (its last line of error), ``both fail`` where both did (the tool
  itself failing before or after it ran the model: whether with the same error is said).

Each child runs with ``PYTHONHASHSEED=0``: onnxslim orders some of what it writes by set
iteration, so its files differ run to run, with onnxruntime alone, unless the seed is fixed.

The corpus is the one tests/corpus builds (``.cache/corpus``, built on first use).  Exit status 0
when nothing differs and onnxkit fails nowhere onnxruntime succeeds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SIDES = ("onnxruntime", "onnxkit")
TOOLS = ("onnxsim", "onnxslim")


# -- the child: one tool, one side, one model ------------------------------------------------------
_COUNTS: dict = {}


def _counted(onnxruntime) -> dict:
    """``{"sessions": n, "runs": n}`` of ``onnxruntime.InferenceSession`` (counters put on the class once)."""
    cls = onnxruntime.InferenceSession
    if not _COUNTS:
        init, run = cls.__init__, cls.run

        def counted_init(self, *a, **k):
            _COUNTS["sessions"] += 1
            return init(self, *a, **k)

        def counted_run(self, *a, **k):
            _COUNTS["runs"] += 1
            return run(self, *a, **k)

        cls.__init__, cls.run = counted_init, counted_run
    _COUNTS.update(sessions=0, runs=0)
    return _COUNTS


def one(tool: str, side: str, src: str, dst: str, check: int = 0) -> dict:
    """Run ``tool`` on ``src`` with ``side`` as onnxruntime and write ``dst``; returns the runtime's
    module name, the seconds taken and the sessions the tool made and ran (``side`` onnxkit: the
    stand-in is installed first, and stays for the process)."""
    if side == "onnxkit":
        import onnxkit

        onnxkit.install_as_onnxruntime()
    import onnx
    import onnxruntime

    counts = _counted(onnxruntime)
    t0 = time.perf_counter()
    model = onnx.load(src)
    if tool == "onnxsim":
        import onnxsim

        data = None
        feeds = Path(src[: -len(".onnx")] + ".inputs.npz")
        if check and feeds.exists():  # the corpus's fixed inputs: its dynamic extents need no guess
            import numpy as np

            with np.load(feeds) as z:
                data = {k: z[k] for k in z.files}
        out, ok = onnxsim.simplify(model, check_n=check, input_data=data)
        if not ok:
            raise SystemExit("onnxsim: the simplified model's outputs differ from the original's (check_n)")
    else:
        import onnxslim

        out = onnxslim.slim(model)
    onnx.save(out, dst)
    return {"runtime": onnxruntime.__name__, "seconds": round(time.perf_counter() - t0, 2), **counts}


# -- the parent ------------------------------------------------------------------------------------
def run_side(tool: str, side: str, src: Path, dst: Path, check: int, timeout: int) -> dict:
    cmd = [sys.executable, __file__, "--one", tool, side, str(src), str(dst), "--check", str(check)]
    # onnxslim's value_info order follows set iteration (nudenet_320n's differs run to run with
    # onnxruntime itself): one hash seed for both sides
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stderr or proc.stdout).strip().splitlines() if ln.strip()]
        return {"error": lines[-1][:300] if lines else f"exit status {proc.returncode}"}
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    want = "onnxkit.ort" if side == "onnxkit" else "onnxruntime"
    if info["runtime"] != want:
        return {"error": f"the tool ran on {info['runtime']}, not {want}"}
    return info


def _error_text(line: str) -> str:
    """An error line less the exception class's module (onnxruntime's and the stand-in's differ)."""
    head, _, rest = line.partition(": ")
    return f"{head.rsplit('.', 1)[-1]}: {rest}" if rest else line


def first_difference(a: Path, b: Path) -> str:
    """Where two model files first differ, in words."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    ma, mb = onnx.load(str(a)), onnx.load(str(b))
    ga, gb = ma.graph, mb.graph
    if len(ga.node) != len(gb.node):
        return f"{len(ga.node)} nodes with onnxruntime, {len(gb.node)} with onnxkit"
    for i, (na, nb) in enumerate(zip(ga.node, gb.node)):
        if na != nb:
            return f"node {i} ({na.op_type} {na.name!r} vs {nb.op_type} {nb.name!r})"
    ia = {t.name: t for t in ga.initializer}
    ib = {t.name: t for t in gb.initializer}
    if set(ia) != set(ib):
        return f"initializers {sorted(set(ia) ^ set(ib))[:4]} on one side only"
    for name in ia:
        if ia[name] != ib[name]:
            xa, xb = numpy_helper.to_array(ia[name]), numpy_helper.to_array(ib[name])
            if xa.shape != xb.shape or xa.dtype != xb.dtype:
                return f"initializer {name!r}: {xa.dtype}{list(xa.shape)} vs {xb.dtype}{list(xb.shape)}"
            diff = np.abs(xa.astype(np.float64) - xb.astype(np.float64)) if xa.dtype.kind in "fiub" else None
            worst = f", largest difference {float(diff.max()):.3g}" if diff is not None and diff.size else ""
            return f"initializer {name!r} ({xa.dtype}{list(xa.shape)}){worst}"
    for field in ("input", "output", "value_info"):
        if list(getattr(ga, field)) != list(getattr(gb, field)):
            return f"graph {field}"
    return "the model's other fields (opset imports, metadata, functions)"


def corpus_models(names) -> list:
    sys.path.insert(0, str(REPO / "tests" / "corpus"))
    from corpus_cache import ensure_corpus

    out, manifest = ensure_corpus(log=lambda line: print(line, file=sys.stderr))
    found = sorted(p for p in Path(out).glob("*.onnx"))
    if names:
        found = [p for p in found if p.stem in names]
        missing = set(names) - {p.stem for p in found}
        if missing:
            raise SystemExit(f"no corpus model {sorted(missing)} in {out}")
    return found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", help="corpus model names (default: all)")
    ap.add_argument("--tools", default=",".join(TOOLS), help="comma-separated: onnxsim, onnxslim")
    ap.add_argument("--check", type=int, default=0, help="onnxsim's check_n: random-input checks of its result")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per tool run")
    ap.add_argument("--one", nargs=4, metavar=("TOOL", "SIDE", "SRC", "DST"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one(*args.one, check=args.check)))
        return 0
    tools = [t for t in args.tools.split(",") if t]
    bad = 0
    counts: dict = {}
    with tempfile.TemporaryDirectory(prefix="onnxkit-model-tools-") as tmp:
        for src in corpus_models(args.models):
            for tool in tools:
                got = {side: run_side(tool, side, src, Path(tmp) / f"{side}.onnx", args.check, args.timeout)
                       for side in SIDES}
                ort_err, kit_err = got["onnxruntime"].get("error"), got["onnxkit"].get("error")
                if ort_err and kit_err:
                    same = "the same error" if _error_text(ort_err) == _error_text(kit_err) else f"onnxkit: {kit_err}"
                    verdict = f"both fail (onnxruntime: {ort_err}; {same})"
                elif kit_err:
                    verdict, bad = f"fails on onnxkit: {kit_err}", bad + 1
                elif ort_err:
                    verdict = f"fails on onnxruntime only: {ort_err}"
                elif (Path(tmp) / "onnxruntime.onnx").read_bytes() == (Path(tmp) / "onnxkit.onnx").read_bytes():
                    verdict = "equal"
                else:
                    verdict = "differs: " + first_difference(Path(tmp) / "onnxruntime.onnx", Path(tmp) / "onnxkit.onnx")
                    bad += 1
                kit = got["onnxkit"]
                runs = f" [onnxkit: {kit['sessions']} sessions, {kit['runs']} runs, {kit['seconds']} s]" if not kit_err else ""
                print(f"{src.stem:36} {tool:9} {verdict}{runs}", flush=True)
                key = verdict.split(":")[0].split(" (")[0]
                counts.setdefault(tool, {}).setdefault(key, 0)
                counts[tool][key] += 1
    for tool, c in counts.items():
        print(f"{tool}: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
