"""Run onnxruntime's own Python API tests with onnxruntime and with onnxkit standing in for it.

    python3 tools/ort_api_tests.py /path/to/onnxruntime-checkout [--show N] [--keep LOG_DIR]

The checkout (or an extract holding ``onnxruntime/test/python`` and ``onnxruntime/test/testdata``)
is not part of this project: fetch it yourself.  Each in-scope file (:data:`FILES`) runs twice
with pytest from its folder, each file and run in its own process (so that one file's global
state -- logger severity, thread pools, files left in the folder -- cannot change another's
outcome): once as it is (the real onnxruntime), once with a pytest plugin that calls
:func:`onnxkit.install_as_onnxruntime` before any test module is imported.  ``--keep DIR``
writes each run's pytest output there.  Prints, per file and in total, how many pass on each,
how many of onnxruntime's passes pass on onnxkit, and the tests that pass on onnxruntime but
not on onnxkit (the first ``--show`` of them, with the first line of their error).  A test one of
whose ``subTest`` blocks failed counts as failed (``SUBFAILED``, with its first failed subtest),
although pytest reports the test itself as passed.

onnxruntime_test_float8.py imports ``parameterized``: run the tool with a Python that has it
(a ``--system-site-packages`` venv), else that file is a collection error on both sides.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

FILES = [
    "onnxruntime_test_python.py", "onnxruntime_test_python_iobinding.py", "onnxruntime_test_python_mlops.py",
    "onnxruntime_test_python_sparse_matmul.py", "onnxruntime_test_python_nested_control_flow_op.py",
    "onnxruntime_test_python_global_threadpool.py", "onnxruntime_test_python_backend.py",
    "onnxruntime_test_python_backend_mlops.py", "onnxruntime_test_scatternd.py", "onnxruntime_test_float8.py",
]

PLUGIN = '''"""pytest plugin (written by tools/ort_api_tests.py): onnxkit stands in for onnxruntime."""
import onnxkit

onnxkit.install_as_onnxruntime()
'''

_LINE = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+?)(?: - (.*))?$")
#: pytest's line for one failed ``subTest`` (the test itself is then still reported PASSED).
_SUBFAIL = re.compile(r"^SUBFAILED\((.*?)\) (\S+::\S+)(?: - (.*))?$")


def run_pytest(folder: str, files: list, plugin_dir=None, timeout: int = 1800, keep=None) -> dict:
    """``{test id: (outcome, message)}`` of one pytest run over ``files`` in ``folder``;
    the whole output is written to the file ``keep`` when given."""
    env = dict(os.environ)
    env["COLUMNS"] = "400"  # the short summary keeps the first line of each error
    cmd = [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "--continue-on-collection-errors", *files]
    if plugin_dir is not None:
        env["PYTHONPATH"] = plugin_dir + os.pathsep + env.get("PYTHONPATH", "")
        cmd[3:3] = ["-p", "ort_standin"]
    proc = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=timeout)
    if keep:
        with open(keep, "w", encoding="utf-8") as fh:
            fh.write(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    results: dict = {}
    subfailed: dict = {}
    for line in proc.stdout.splitlines():
        m = _LINE.match(line.strip())
        if m and "::" in m.group(2):
            results.setdefault(m.group(2), (m.group(1), m.group(3) or ""))
            continue
        m = _SUBFAIL.match(line.strip())
        if m:
            subfailed.setdefault(m.group(2), f"subtest ({m.group(1)}): {m.group(3) or ''}")
    for test, msg in subfailed.items():  # a test with a failed subtest has not passed
        results[test] = ("SUBFAILED", msg)
    if not results and proc.returncode not in (0, 1, 5):
        raise SystemExit(f"no test results from {' '.join(cmd)}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return results


def compare(ort: dict, kit: dict) -> dict:
    """Counts: per file and in total, passes on each and onnxruntime's passes kept."""
    out: dict = {}
    for test, (outcome, _) in ort.items():
        f = test.split("::", 1)[0]
        row = out.setdefault(f, {"ort": 0, "kit": 0, "kept": 0})
        if outcome == "PASSED":
            row["ort"] += 1
            if kit.get(test, ("",))[0] == "PASSED":
                row["kept"] += 1
    for test, (outcome, _) in kit.items():
        f = test.split("::", 1)[0]
        if outcome == "PASSED":
            out.setdefault(f, {"ort": 0, "kit": 0, "kept": 0})["kit"] += 1
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkout", help="an onnxruntime checkout or extract (with onnxruntime/test/python)")
    ap.add_argument("--show", type=int, default=40, help="list this many of the tests lost on onnxkit")
    ap.add_argument("--keep", default=None, help="write each run's pytest output into this folder")
    ap.add_argument("files", nargs="*", help="only these of the in-scope files")
    args = ap.parse_args(argv)
    folder = os.path.join(args.checkout, "onnxruntime", "test", "python")
    if not os.path.isdir(folder):
        folder = args.checkout
    files = [f for f in (args.files or FILES) if os.path.exists(os.path.join(folder, f))]
    if not files:
        print(f"none of the test files is in {folder}", file=sys.stderr)
        return 2
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)

    def log(f, side):
        return os.path.join(args.keep, f"{f[:-3]}.{side}.txt") if args.keep else None

    ort: dict = {}
    kit: dict = {}
    with tempfile.TemporaryDirectory(prefix="onnxkit-ort-tests-") as d:
        with open(os.path.join(d, "ort_standin.py"), "w", encoding="utf-8") as fh:
            fh.write(PLUGIN)
        for f in files:
            ort.update(run_pytest(folder, [f], keep=log(f, "onnxruntime")))
            kit.update(run_pytest(folder, [f], plugin_dir=d, keep=log(f, "onnxkit")))
    rows = compare(ort, kit)
    print(f"{'file':50} {'pass ort':>9} {'pass onnxkit':>13} {'ort passes kept':>16}")
    total = {"ort": 0, "kit": 0, "kept": 0}
    for f, r in sorted(rows.items()):
        print(f"{f:50} {r['ort']:9} {r['kit']:13} {r['kept']:16}")
        for k in total:
            total[k] += r[k]
    share = 100.0 * total["kept"] / total["ort"] if total["ort"] else 0.0
    print(f"{'total':50} {total['ort']:9} {total['kit']:13} {total['kept']:16}  ({share:.1f}% of onnxruntime's passes)")
    lost = [(t, kit.get(t, ("MISSING", ""))) for t, (o, _) in ort.items() if o == "PASSED" and kit.get(t, ("",))[0] != "PASSED"]
    for t, (o, msg) in lost[:args.show]:
        print(f"  lost: {t} [{o}] {msg[:160]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
