"""Time to first result as a user gets it: the wheels ``pip install``-ed into a fresh virtual environment.

``cold_start.py`` times the development install (editable, the test extras' pins).  This script
does what a user does: it builds the wheels of this working tree (as ``.ci/wheels``: a copy of
the tracked and untracked files, ``pip wheel --no-deps --no-build-isolation`` per project), makes
a fresh virtual environment and ``pip install``-s them there, the third-party dependencies
resolved today from the package index (no pins but the projects' own: ml_dtypes, numpy, numba
as released now; pip byte-compiles on install, as for a user); and a second fresh environment
with ``pip install onnxruntime numpy``.  Then for each model (the bundled example and small
corpus models with their fixed inputs) it starts ``--repeat`` fresh processes per runtime,
interleaved (kit, ort, ort, kit, ...), each ``python -I`` from an empty folder outside the
repository with ``NUMBA_CACHE_DIR`` a new empty folder (no compiled loop cached), timing from
before ``import`` to the first result; medians, the ratio onnxkit / onnxruntime per model and
the geometric mean; one intra-op thread each (onnxruntime also one inter-op thread).  A first
round per runtime warms the disk cache and is not counted.  It also reports, for onnxkit, the
median import time alone and whether numba was imported by the first run, and each process's
CPU time (user + system, from the parent's accounting of its children): on a machine shared with
other work the wall time stretches with the load, the CPU time much less.  The process's CPU
time counts its interpreter's start and its exit too (the exit's garbage collections and
deallocation of every module's objects: more objects, more time); the CPU time to the first
result (``time.process_time()`` at the result, all threads, from the process's start) leaves
the exit out.

``--profile`` prints the largest cumulative entries of ``python -X importtime`` and a cProfile
of import + session + first run (sorted by cumulative time) for the first model, in the fresh
environment.  ``--keep DIR`` builds into DIR and reuses its environments when present (a rerun
then times without reinstalling); otherwise a temporary folder is used and removed.  ``--rev REV``
builds from commit REV (``git archive``) instead of the working tree.
Run: ``python benchmarks/first_result.py [--repeat N] [-k NAME] [--keep DIR] [--rev REV] [--profile]``.
Needs the package index (or its mirror) reachable, and onnxruntime's wheel there.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROJECTS = (".", "packaging/onnxkit", "plugins/default_domain", "plugins/ml_domain", "plugins/microsoft_domain",
            "plugins/cpu_backend")
#: small corpus models timed beside the bundled example
CORPUS = ("small_resnet_ts", "hf_bert_ts", "magika_standard_v3_3", "silero_vad_16k_op15")

_CHILD = r'''
import sys, time
t0 = time.perf_counter()
runtime, model, inputs = sys.argv[1], sys.argv[2], sys.argv[3]
if runtime == "ort":
    import onnxruntime as rt
    t_import = time.perf_counter() - t0
    so = rt.SessionOptions(); so.intra_op_num_threads = 1; so.inter_op_num_threads = 1
    s = rt.InferenceSession(model, so, providers=["CPUExecutionProvider"])
else:
    import onnxkit as rt
    t_import = time.perf_counter() - t0
    so = rt.SessionOptions(); so.intra_op_num_threads = 1
    s = rt.InferenceSession(model, so)
import numpy as np
feeds = dict(np.load(inputs)) if inputs != "-" else {"image": np.zeros((1, 1, 8, 8), np.float32)}
s.run(None, feeds)
total = time.perf_counter() - t0
cpu_first = time.process_time()
import json
print("FIRST " + json.dumps({"total": total, "import": t_import, "numba": "numba" in sys.modules, "cpu_first": cpu_first}))
'''


def _run(cmd, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({proc.returncode}):\n{proc.stdout[-3000:]}"
                           f"{proc.stderr[-3000:]}")
    return proc


def build_wheels(work: Path, rev=None) -> list:
    """The wheels of :data:`PROJECTS`, built into ``work/dist`` from a copy of the working tree
    (``rev=None``) or of the commit ``rev`` (``git archive``)."""
    src, dist = work / "src", work / "dist"
    if dist.is_dir() and any(dist.glob("*.whl")):
        return sorted(dist.glob("*.whl"))
    src.mkdir(parents=True, exist_ok=True)
    if rev:
        archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    else:
        files = _run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT).stdout
        for rel in filter(None, files.split("\0")):
            if (ROOT / rel).is_file():
                (src / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / rel, src / rel)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for project in PROJECTS:
        _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist),
              str(src / project)], env=env)
    return sorted(dist.glob("*.whl"))


def make_env(folder: Path, requirements: list) -> Path:
    """A fresh virtual environment at ``folder`` with ``requirements`` installed (reused when present)."""
    python, done = folder / "bin" / "python", folder / "installed.txt"
    if done.exists():
        return python
    shutil.rmtree(folder, ignore_errors=True)
    _run([sys.executable, "-m", "venv", str(folder)])
    # today's resolution: no constraints file (this machine's only caps torch, which is not installed)
    env = {**os.environ, "PIP_CONSTRAINT": ""}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    _run([str(python), "-m", "pip", "install", "-q", *map(str, requirements)], env=env)
    done.write_text("\n".join(map(str, requirements)) + "\n")
    return python


def versions(python: Path, names) -> str:
    code = ("import importlib.metadata as m\nfor n in %r:\n    try: print(n, m.version(n))\n"
            "    except Exception: pass" % (tuple(names),))
    return ", ".join(_run([str(python), "-I", "-c", code]).stdout.split("\n")[:-1])


def models(pattern: str) -> list:
    found = [("digits (example)", ROOT / "examples" / "digits.onnx", "-")]
    corpus = Path(os.environ.get("ONNXKIT_CORPUS", ROOT / ".cache" / "corpus"))
    for name in CORPUS:
        path, inputs = corpus / f"{name}.onnx", corpus / f"{name}.inputs.npz"
        if path.exists() and inputs.exists():
            found.append((name, path, inputs))
    return [m for m in found if pattern in m[0]]


def one_process(python: Path, runtime: str, model: Path, inputs, scratch: Path) -> dict:
    """One fresh process's time to first result, from an empty folder with an empty numba cache."""
    cache = Path(tempfile.mkdtemp(dir=scratch, prefix="numba-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ONNXKIT_", "PYTHON", "NUMBA_"))}
    env.update(NUMBA_CACHE_DIR=str(cache), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        proc = _run([str(python), "-I", "-c", _CHILD, runtime, str(model), str(inputs)], env=env, cwd=scratch,
                    timeout=600)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    for line in proc.stdout.splitlines():
        if line.startswith("FIRST "):
            # the process's CPU time (user + system): what the load of other work does not stretch
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            return {**json.loads(line[6:]), "cpu": cpu}
    raise RuntimeError(f"{runtime} on {model.name}: no result\n{proc.stderr[-2000:]}")


def profile(python: Path, model: Path, inputs, scratch: Path, top: int = 25) -> None:
    """``-X importtime``'s largest cumulative imports and cProfile's top of a first result."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ONNXKIT_", "PYTHON", "NUMBA_"))}
    env["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(dir=scratch, prefix="numba-")
    proc = subprocess.run([str(python), "-I", "-X", "importtime", "-c", _CHILD, "kit", str(model), str(inputs)],
                          capture_output=True, text=True, env=env, cwd=scratch)
    rows = []
    for line in proc.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), int(parts[0].split(":")[1]), parts[2].rstrip()))
    print(f"\n-X importtime, {len(rows)} modules, {sum(r[1] for r in rows) / 1e3:.0f} ms self in all; "
          f"largest cumulative (us):")
    for cum, self_us, name in sorted(rows, reverse=True)[:top]:
        print(f"  {cum:9d} {self_us:8d} {name}")
    code = ("import cProfile, pstats, sys\nsys.argv = ['-', 'kit', %r, %r]\n"
            "cProfile.run(compile(%r, '<first>', 'exec'), 'prof.out')\n"
            "pstats.Stats('prof.out').sort_stats('cumulative').print_stats(%d)" % (str(model), str(inputs), _CHILD, top))
    out = subprocess.run([str(python), "-I", "-c", code], capture_output=True, text=True, env=env, cwd=scratch)
    print("\ncProfile, import + session + first run, by cumulative time:")
    print("\n".join(out.stdout.splitlines()[:top + 12]))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="fresh processes per runtime and model (median)")
    parser.add_argument("-k", default="", help="only models whose name contains this")
    parser.add_argument("--keep", default=None, help="work folder kept (wheels, environments) and reused")
    parser.add_argument("--profile", action="store_true", help="-X importtime and cProfile of the first model")
    parser.add_argument("--rev", default=None, help="build the wheels from this commit (default: the working tree)")
    args = parser.parse_args(argv)
    work = (Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="onnxkit-first-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    try:
        reused = (work / "dist").is_dir() and any((work / "dist").glob("*.whl"))
        wheels = build_wheels(work, args.rev)
        print("wheels reused from" if reused else "wheels built from " + (args.rev or "the working tree") + " into",
              work / "dist")
        kit = make_env(work / "venv-kit", wheels)
        ort = make_env(work / "venv-ort", ["onnxruntime", "numpy"])
        scratch = Path(tempfile.mkdtemp(dir=work, prefix="scratch-"))
        load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
        print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; {platform.machine()}; "
              f"{len(os.sched_getaffinity(0))} CPUs available; load average {load}; Python {platform.python_version()}")
        print("onnxkit environment:", versions(kit, ("onnxkit-core", "numpy", "ml_dtypes", "numba", "llvmlite",
                                                     "pluggy", "attrs", "rich", "importlib-metadata")))
        print("onnxruntime environment:", versions(ort, ("onnxruntime", "numpy")))
        print(f"fresh processes (python -I, empty numba cache), interleaved, median of {args.repeat}; one thread each")
        print(f"{'model':22} {'onnxkit s':>9} {'ort s':>7} {'ratio':>6} {'kit import':>10} {'ort import':>10}  "
              f"{'kit cpu s':>9} {'ort cpu s':>9} {'ratio':>6}  {'kit cpu1 s':>10} {'ort cpu1 s':>10} {'ratio':>6}  numba")
        ratios, cpu_ratios, first_ratios = [], [], []
        cases = models(args.k)
        for name, path, inputs in cases:
            one_process(kit, "kit", path, inputs, scratch), one_process(ort, "ort", path, inputs, scratch)
            samples = {"kit": [], "ort": []}
            for i in range(args.repeat):
                for runtime in (("kit", "ort") if i % 2 == 0 else ("ort", "kit")):
                    python = kit if runtime == "kit" else ort
                    samples[runtime].append(one_process(python, runtime, path, inputs, scratch))
            k, o = (statistics.median(s["total"] for s in samples[r]) for r in ("kit", "ort"))
            ki, oi = (statistics.median(s["import"] for s in samples[r]) for r in ("kit", "ort"))
            kc, oc = (statistics.median(s["cpu"] for s in samples[r]) for r in ("kit", "ort"))
            k1, o1 = (statistics.median(s["cpu_first"] for s in samples[r]) for r in ("kit", "ort"))
            numba = "imported" if any(s["numba"] for s in samples["kit"]) else "not imported"
            ratios.append(k / o)
            cpu_ratios.append(kc / oc)
            first_ratios.append(k1 / o1)
            print(f"{name:22} {k:9.3f} {o:7.3f} {k / o:6.2f} {ki:10.3f} {oi:10.3f}  {kc:9.3f} {oc:9.3f} {kc / oc:6.2f}  "
                  f"{k1:10.3f} {o1:10.3f} {k1 / o1:6.2f}  {numba}", flush=True)
        if ratios:
            geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
            print(f"geometric mean onnxkit / onnxruntime, time to first result after pip install: {geo:.2f} "
                  f"(highest {max(ratios):.2f}; bound 1.5); load average after "
                  + ", ".join(f"{v:.2f}" for v in os.getloadavg()))
            geo = math.exp(sum(map(math.log, cpu_ratios)) / len(cpu_ratios))
            print(f"geometric mean onnxkit / onnxruntime, CPU time of the process: {geo:.2f} "
                  f"(highest {max(cpu_ratios):.2f})")
            geo = math.exp(sum(map(math.log, first_ratios)) / len(first_ratios))
            print(f"geometric mean onnxkit / onnxruntime, CPU time to the first result: {geo:.2f} "
                  f"(highest {max(first_ratios):.2f})")
        if args.profile and cases:
            profile(kit, cases[0][1], cases[0][2], scratch)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
