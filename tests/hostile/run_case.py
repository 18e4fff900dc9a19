"""Run one hostile case in this process, under an address-space cap; print one JSON line.

    python run_case.py CASE_FILE          # CASE_FILE: a pickle of (model bytes, feeds, limits)

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


def main(path: str) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (AS_CAP, AS_CAP))
    with open(path, "rb") as f:
        blob, feeds, limit_kwargs, threads, hide_re2 = pickle.load(f)
    if hide_re2:
        sys.modules["re2"] = None  # the binding is missing: import re2 raises ImportError
    import onnxkit
    from onnxkit.limits import Limits

    out = {"error": None}
    t0 = time.perf_counter()
    try:
        sess = onnxkit.InferenceSession(blob, limits=Limits(**limit_kwargs))
        if threads:
            results = _threads(sess, feeds, threads)
            out["result"] = results
        else:
            outs = sess.run(None, feeds)
            out["result"] = [o.tolist() if hasattr(o, "tolist") else repr(o)[:200] for o in outs]
    except BaseException as exc:  # noqa: BLE001 - reported, the parent judges
        out.update(error=type(exc).__name__, limit=getattr(exc, "limit", None), message=str(exc)[:2000],
                   memory_error=_chain_has_memory_error(exc), onnxkit=type(exc).__module__.startswith("onnxkit"))
    out["seconds"] = time.perf_counter() - t0
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


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
    main(sys.argv[1])
