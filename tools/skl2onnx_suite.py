"""Run skl2onnx's own test suite with onnxruntime and with onnxkit standing in for it, and compare.

    python3 tools/skl2onnx_suite.py SOURCE [--chunk N] [--timeout S] [--keep DIR] [--show N] [FILE ...]

SOURCE is skl2onnx's source distribution (``pip download skl2onnx==VERSION --no-binary :all:
--no-deps``: the ``.tar.gz`` itself, its extracted folder, or the folder holding its ``tests``);
it is not part of this project.  The tests run against the *installed* skl2onnx, so fetch the
sdist of the installed version.  Each side gets its own copy of the ``tests`` folder (the tests
write files next to themselves) and runs its test files in chunks of ``--chunk`` files, each
chunk in its own pytest process under ``--timeout`` seconds: once as they are (the real
onnxruntime), once with a pytest plugin that calls :func:`onnxkit.install_as_onnxruntime` before
any test module is imported.  Both plugins name the ``onnxruntime`` module the tests imported at the
end of pytest's output, and a chunk whose output does not name the expected module stops the tool, so a
comparison of onnxruntime with itself cannot pass unnoticed.

``--keep DIR`` writes each chunk's pytest output and parsed results there, and a later run with
the same ``--keep`` reuses the chunks already done (delete a file to run its chunk again); the
report covers every chunk kept there (a test's latest run counts), so a slow chunk can be run again file by file (``--chunk 1``
and its file names) into the same folder.  Processes sharing ``--keep`` (one side each, or one
with ``--reverse``) leave each other's chunks alone.  The
report: per side how many tests pass, fail, error and are skipped; how many of onnxruntime's
passes pass on onnxkit; the tests that pass on onnxruntime and not on onnxkit (with the first
line of their error), those that pass on onnxkit only, and those that fail on both.  A chunk that
runs past its timeout marks its tests that gave no result as ``TIMEOUT``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import re
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ort_api_tests import _LINE, _SUBFAIL  # noqa: E402  (pytest's summary lines, parsed one way)

#: The pytest plugin of each side: onnxkit's installs the stand-in; both name the module in use.
PLUGINS = {
    "onnxruntime": '''"""pytest plugin (written by tools/skl2onnx_suite.py): the real onnxruntime."""


def pytest_terminal_summary(terminalreporter):
    import onnxruntime

    terminalreporter.write_line("onnxruntime module: " + getattr(onnxruntime, "__file__", "?"))
''',
    "onnxkit": '''"""pytest plugin (written by tools/skl2onnx_suite.py): onnxkit stands in for onnxruntime."""
import onnxkit

onnxkit.install_as_onnxruntime()


def pytest_terminal_summary(terminalreporter):
    import onnxruntime

    assert onnxruntime.InferenceSession is onnxkit.InferenceSession
    terminalreporter.write_line("onnxruntime module: onnxkit " + onnxkit.__file__)
''',
}
#: What the header line must contain on each side.
EXPECT = {"onnxruntime": "site-packages", "onnxkit": "onnxkit "}
SIDES = ("onnxruntime", "onnxkit")
#: pytest's ``-rA`` line for skipped tests, one per location: ``SKIPPED [count] file:line: reason``.
_SKIP = re.compile(r"^SKIPPED \[(\d+)\] (\S+?): (.*)$")


def find_tests(source: str, work: str) -> str:
    """The ``tests`` folder of ``source`` (a tarball is extracted into ``work``)."""
    if os.path.isfile(source):
        with tarfile.open(source) as tar:
            tar.extractall(work, filter="data")
        source = work
    for root, dirs, files in os.walk(source):
        if os.path.basename(root) == "tests" and "test_utils" in dirs:
            return root
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
    raise SystemExit(f"no skl2onnx tests folder (tests/ with test_utils/) under {source}")


def run_chunk(folder: str, files: list, side: str, plugin_dir: str, timeout: int) -> tuple:
    """``({test id: [outcome, message]}, output)`` of one pytest process over ``files``."""
    env = dict(os.environ)
    env["COLUMNS"] = "400"  # the short summary keeps the first line of each error
    env["PYTHONPATH"] = plugin_dir + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("ONNXTESTDUMP", None)
    cmd = [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-p", f"skl_{side}",
           "--continue-on-collection-errors", *files]
    timed_out = False
    try:
        proc = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=timeout)
        out, err = proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as e:
        timed_out = True
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
    header = [ln for ln in out.splitlines() if ln.startswith("onnxruntime module: ")]
    if not timed_out and (not header or EXPECT[side] not in header[0]):
        raise SystemExit(f"the {side} run of {files} did not run on {side}: {header or out[-2000:] + err[-2000:]}")
    results: dict = {}
    for line in out.splitlines():
        m = _LINE.match(line.strip())
        if m and "::" in m.group(2):
            results.setdefault(m.group(2), [m.group(1), m.group(3) or ""])
            continue
        m = _SUBFAIL.match(line.strip())
        if m:
            results[m.group(2)] = ["SUBFAILED", f"subtest ({m.group(1)}): {m.group(3) or ''}"]
            continue
        m = _SKIP.match(line.strip())
        if m:  # skips are reported per location, not per test: the key is the location
            results[m.group(2)] = ["SKIPPED", m.group(3), int(m.group(1))]
    if timed_out:
        results["::".join([files[0], "<chunk timed out>"])] = ["TIMEOUT", f"after {timeout} s: {' '.join(files)}"]
    return results, out + "\n--- stderr ---\n" + err


def chunks(files: list, size: int) -> list:
    return [files[i:i + size] for i in range(0, len(files), size)]


def summarize(ort: dict, kit: dict, show: int) -> dict:
    """Prints the report; returns its counts."""
    counts = {}
    for side, res in (("onnxruntime", ort), ("onnxkit", kit)):
        c: dict = {}
        for outcome, *rest in res.values():
            c[outcome] = c.get(outcome, 0) + (rest[1] if len(rest) > 1 else 1)
        counts[side] = c
        print(f"{side:12} " + "  ".join(f"{k} {v}" for k, v in sorted(c.items())))
    passed = [t for t, (o, *_) in ort.items() if o == "PASSED"]
    lost = [t for t in passed if kit.get(t, ["MISSING"])[0] != "PASSED"]
    gained = [t for t, (o, *_) in kit.items() if o == "PASSED" and ort.get(t, ["MISSING"])[0] != "PASSED"]
    both = [t for t, (o, *_) in ort.items() if o in ("FAILED", "ERROR", "SUBFAILED", "TIMEOUT")
            and kit.get(t, ["MISSING"])[0] != "PASSED"]
    kept = len(passed) - len(lost)
    share = 100.0 * kept / len(passed) if passed else 0.0
    print(f"onnxruntime's passes that pass on onnxkit: {kept} of {len(passed)} ({share:.2f}%)")
    for title, tests, res in (("pass on onnxruntime, not on onnxkit", lost, kit),
                              ("pass on onnxkit, not on onnxruntime", gained, ort),
                              ("fail on both (onnxruntime's outcome)", both, ort)):
        print(f"{title}: {len(tests)}")
        for t in tests[:show]:
            o, msg = res.get(t, ["MISSING", ""])[:2]
            print(f"  {t} [{o}] {msg[:200]}")
    return {"counts": counts, "kept": kept, "passed": len(passed), "lost": lost, "gained": gained, "both": both}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", help="skl2onnx's sdist (.tar.gz), its extracted folder or its tests folder")
    ap.add_argument("files", nargs="*", help="only these test files (names in tests/)")
    ap.add_argument("--chunk", type=int, default=6, help="test files per pytest process")
    ap.add_argument("--timeout", type=int, default=1500, help="seconds one pytest process may run")
    ap.add_argument("--keep", default=None, help="folder for each chunk's output and results (reused)")
    ap.add_argument("--show", type=int, default=100, help="list this many tests of each kind")
    ap.add_argument("--side", choices=("both",) + SIDES, default="both", help="run only one side")
    ap.add_argument("--reverse", action="store_true", help="run the chunks last first (a second process "
                    "sharing --keep with a first one meets it in the middle)")
    args = ap.parse_intermixed_args(argv)
    work = tempfile.mkdtemp(prefix="onnxkit-skl2onnx-")
    try:
        tests = find_tests(args.source, os.path.join(work, "src"))
        files = args.files or sorted(f for f in os.listdir(tests) if f.startswith("test_") and f.endswith(".py"))
        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
        plugin_dir = os.path.join(work, "plugins")
        os.makedirs(plugin_dir)
        for side, text in PLUGINS.items():
            with open(os.path.join(plugin_dir, f"skl_{side}.py"), "w", encoding="utf-8") as fh:
                fh.write(text)
        results: dict = {side: {} for side in SIDES}
        sides = SIDES if args.side == "both" else (args.side,)
        folders = {}
        for side in sides:
            folders[side] = os.path.join(work, side, "tests")
            shutil.copytree(tests, folders[side])
        order = list(enumerate(chunks(files, args.chunk)))
        for i, group in reversed(order) if args.reverse else order:
            for side in sides:  # interleaved, so both sides see the same machine load over time
                name = f"{i:03d}_{group[0][:-3]}.{side}"
                saved = os.path.join(args.keep, name + ".json") if args.keep else None
                if saved and os.path.exists(saved):
                    with open(saved, encoding="utf-8") as fh:
                        results[side].update(json.load(fh))
                    continue
                if saved:  # another process sharing --keep may be running this chunk: leave it to that one
                    try:
                        os.close(os.open(saved + ".running", os.O_CREAT | os.O_EXCL))
                    except FileExistsError:
                        continue
                try:
                    res, output = run_chunk(folders[side], group, side, plugin_dir, args.timeout)
                    if saved:
                        with open(os.path.join(args.keep, name + ".txt"), "w", encoding="utf-8") as fh:
                            fh.write(output)
                        with open(saved, "w", encoding="utf-8") as fh:
                            json.dump(res, fh, indent=0)
                finally:
                    if saved:
                        os.remove(saved + ".running")
                results[side].update(res)
                passed = sum(r[0] == "PASSED" for r in res.values())
                print(f"[{side}] {' '.join(group)}: {passed} passed, {len(res) - passed} other results",
                      file=sys.stderr, flush=True)
        if args.keep:  # every chunk kept there, whatever its size, the latest run of a test last
            for side in SIDES:
                for name in sorted(os.listdir(args.keep), key=lambda n: os.path.getmtime(os.path.join(args.keep, n))):
                    if name.endswith(f".{side}.json"):
                        with open(os.path.join(args.keep, name), encoding="utf-8") as fh:
                            results[side].update(json.load(fh))
        summarize(results["onnxruntime"], results["onnxkit"], args.show)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
