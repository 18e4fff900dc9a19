"""Run hostile cases, each in its own process under an address-space cap; one JSON line each.

    python run_case.py CASE_FILE     # run one case in this process; print its line
    python run_case.py --serve       # import onnxkit once, then for each CASE_FILE read on stdin
                                     # fork a child that runs it (the child's line is written to
                                     # CASE_FILE.json; a child past WALL_S is killed), answer "done"

CASE_FILE is a pickle of (model bytes, feeds, limits keywords, threads, hide_re2, backend).  Forking
from a process that has already built the registry keeps each case's cost to the case itself.

The parent (test_hostile.py) builds the case with the ``onnx`` package and writes it; this
process needs only onnxkit.  The line says what happened: the error's class, its ``limit``,
its message, whether a MemoryError is anywhere in its cause or context chain, the seconds
the session took (creation + run), the peak RSS in MiB and the outputs when it succeeded.
"""

from __future__ import annotations

import json
import pickle
import resource
import sys
import time

AS_CAP = 4 << 30


def _chain_has_memory_error(exc) -> bool:
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, MemoryError):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def main(path: str) -> str:
    resource.setrlimit(resource.RLIMIT_AS, (AS_CAP, AS_CAP))
    with open(path, "rb") as f:
        blob, feeds, limit_kwargs, threads, hide_re2, backend = pickle.load(f)
    if hide_re2:
        sys.modules["re2"] = None  # the binding is missing: import re2 raises ImportError
    import onnxkit
    from onnxkit.limits import Limits

    out = {"error": None}
    # CPU seconds of this process (all its threads), not wall: independent of the machine's load;
    # a hang that waits is caught by the parent's wall-clock limit (WALL_S)
    t0 = time.process_time()
    try:
        sess = onnxkit.InferenceSession(blob, backend, limits=Limits(**limit_kwargs))
        if threads:
            results = _threads(sess, feeds, threads)
            out["result"] = results
        else:
            outs = sess.run(None, feeds)
            out["result"] = [o.tolist() if hasattr(o, "tolist") else repr(o)[:200] for o in outs]
    except BaseException as exc:  # noqa: BLE001 - reported, the parent judges
        out.update(error=type(exc).__name__, limit=getattr(exc, "limit", None), message=str(exc)[:2000],
                   memory_error=_chain_has_memory_error(exc), onnxkit=type(exc).__module__.startswith("onnxkit"))
    out["seconds"] = time.process_time() - t0
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return json.dumps(out)


def serve(wall_s: float) -> None:
    import os
    import signal

    import onnxkit  # noqa: F401 - imported once, before forking
    from onnxkit.registry import get_registry

    get_registry()
    try:  # the gpu backend's torch, imported once too (its import is not what a case measures)
        import torch  # noqa: F401
    except ImportError:
        pass
    for line in sys.stdin:
        path = line.strip()
        pid = os.fork()
        if pid == 0:
            try:
                report = main(path)
            except BaseException as exc:  # noqa: BLE001
                report = json.dumps({"error": f"harness: {type(exc).__name__}: {exc}"})
            with open(path + ".json", "w") as f:
                f.write(report)
            os._exit(0)
        deadline = time.monotonic() + wall_s
        while os.waitpid(pid, os.WNOHANG) == (0, 0):
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                with open(path + ".json", "w") as f:
                    f.write(json.dumps({"error": "timeout", "seconds": wall_s}))
                break
            time.sleep(0.005)
        print("done", flush=True)


def _threads(sess, feeds, n):
    """``n`` threads at once, alternately a good feed and a hostile one; what each got."""
    import threading

    good, bad = feeds
    got = [None] * n
    barrier = threading.Barrier(n)

    def work(k):
        barrier.wait()
        try:
            for _ in range(5):
                y = sess.run(None, good if k % 2 == 0 else bad)[0]
            got[k] = ["ok", y.tolist()]
        except Exception as exc:  # noqa: BLE001
            got[k] = [type(exc).__name__, getattr(exc, "limit", None)]

    ts = [threading.Thread(target=work, args=(k,)) for k in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return got


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        serve(float(sys.argv[2]) if len(sys.argv) > 2 else 60.0)
    else:
        print(main(sys.argv[1]))
