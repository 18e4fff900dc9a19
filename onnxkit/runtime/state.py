"""What one watched run carries down the plan: termination, a time limit, a profiler.

A plain run has no :class:`RunState` and the run loop does nothing per node beyond calling
the kernel.  When ``RunOptions.terminate`` can be set, a time limit is given or profiling is
on, the session passes a :class:`RunState` and :meth:`GraphPlan.run` uses its watched loop:
:meth:`RunState.check` before every node; the state travels to subgraphs (Loop and Scan
bodies, If branches) in the scope they are run with, under the key :data:`RUN_STATE`, so a
body checks before each of its nodes, i.e. between iterations too.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Optional

from ..errors import EvaluationError, OnnxkitError

#: Key of the run state in the value environment a subgraph is run with (not a string, so it
#: cannot collide with a value name).
RUN_STATE = object()


class RunTerminated(EvaluationError):
    """A run was ended on request: ``RunOptions.terminate`` was set, or its time limit passed."""


class RunState:
    """Termination flag, deadline and profiler of one run (see the module docstring)."""

    __slots__ = ("options", "deadline", "limit", "profiler")

    def __init__(self, options=None, profiler: Optional["Profiler"] = None):
        self.options = options
        limit = getattr(options, "run_time_limit_s", None) if options is not None else None
        self.limit = limit
        self.deadline = None if limit is None else time.perf_counter() + float(limit)
        self.profiler = profiler

    def check(self, where: str) -> None:
        """Raise :class:`RunTerminated` when the run was asked to stop or ran out of time."""
        opts = self.options
        if opts is not None and opts.terminate:
            raise RunTerminated(f"run terminated on request (RunOptions.terminate) before {where}")
        if self.deadline is not None and time.perf_counter() > self.deadline:
            raise RunTerminated(f"run exceeded its time limit of {self.limit} s (RunOptions.run_time_limit_s) "
                                f"before {where}")


def _type_shape(value) -> dict:
    """``{element type: shape}`` of one value, as onnxruntime's trace writes it."""
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is None or dtype is None:
        return {type(value).__name__: []}
    name = str(dtype).replace("torch.", "")
    name = {"float32": "float", "float64": "double"}.get(name, name)
    return {name: [int(d) for d in shape]}


class Profiler:
    """Collects onnxruntime-style Chrome trace events (``chrome://tracing``, Perfetto).

    Times are microseconds since the session started profiling.  One ``cat: "Node"`` event per
    node run at the top level of a run (a Loop's body counts as its node's time), and
    ``cat: "Session"`` events for session creation and each run.
    """

    def __init__(self, prefix: str, provider: str):
        self.prefix = prefix
        self.provider = provider
        self.start_ns = time.perf_counter_ns()
        self.start_wall_ns = time.time_ns()
        self.events: list = []
        self.pid = os.getpid()
        self._lock = threading.Lock()

    def now_us(self) -> float:
        return (time.perf_counter_ns() - self.start_ns) / 1000.0

    def session_event(self, name: str, begin_us: float, args: Optional[dict] = None) -> None:
        self._add({"cat": "Session", "pid": self.pid, "tid": threading.get_ident(), "dur": self.now_us() - begin_us,
                   "ts": begin_us, "ph": "X", "name": name, "args": args or {}})

    def node_event(self, step, begin_us: float, args: list, outs) -> None:
        node = step.node
        outs = outs if type(outs) is tuple else (outs,)
        self._add({"cat": "Node", "pid": self.pid, "tid": threading.get_ident(), "dur": self.now_us() - begin_us,
                   "ts": begin_us, "ph": "X", "name": f"{node.name or step.op}_kernel_time",
                   "args": {"op_name": node.op_type, "node_name": node.name, "domain": node.domain,
                            "provider": self.provider,
                            "input_type_shape": [_type_shape(a) for a in args if a is not None],
                            "output_type_shape": [_type_shape(o) for o in outs if o is not None]}})

    def _add(self, event: dict) -> None:
        with self._lock:
            self.events.append(event)

    def write(self, directory: str = ".") -> str:
        """Write the trace as ``<prefix>_<date>_<time>.json`` (``_<n>`` added when that file
        exists: an existing file is never overwritten); returns the file name.  A file that
        cannot be written is an :class:`OnnxkitError` naming ``profile_file_prefix``."""
        with self._lock:
            events = list(self.events)  # a run still adding events cannot change what is written
        stamp = time.strftime("%Y-%m-%d_%H-%M-%S", time.localtime(self.start_wall_ns / 1e9))
        import json  # a profile written: not imported by every session

        n = 0
        while True:
            suffix = f"_{n}" if n else ""
            path = os.path.join(directory, f"{self.prefix}_{stamp}{suffix}.json")
            try:
                with open(path, "x", encoding="utf-8") as fh:
                    # as onnxruntime writes it: "[" alone, one event per line, "]" alone (valid JSON)
                    fh.write("[\n" + ",\n".join(json.dumps(e) for e in events) + "\n]\n")
                return path
            except FileExistsError:
                n += 1
            except (OSError, ValueError) as exc:
                raise OnnxkitError(f"SessionOptions.profile_file_prefix {self.prefix!r}: cannot write the "
                                   f"profile {path!r}: {exc}") from None


def check_profile_prefix(prefix) -> str:
    """``prefix`` (``SessionOptions.profile_file_prefix``) when a trace can be written under it:
    a string without NUL whose directory part, if any, is an existing directory; else an
    :class:`OnnxkitError` naming the option (when the session is created, not after the runs)."""
    if not isinstance(prefix, str):
        raise OnnxkitError(f"SessionOptions.profile_file_prefix must be a str, not {type(prefix).__name__}")
    if "\0" in prefix:
        raise OnnxkitError(f"SessionOptions.profile_file_prefix {prefix!r} contains a NUL character")
    folder = os.path.dirname(prefix)
    if folder and not os.path.isdir(folder):
        raise OnnxkitError(f"SessionOptions.profile_file_prefix {prefix!r}: the directory {folder!r} does not "
                           "exist (the profile is written there by end_profiling)")
    return prefix


def top_operators(events: list, n: int = 10) -> list:
    """``[(op_type, calls, total µs)]`` of the trace's node events, greatest total first."""
    total: dict = {}
    for e in events:
        if e.get("cat") == "Node":
            op = e["args"].get("op_name", e["name"])
            calls, t = total.get(op, (0, 0.0))
            total[op] = (calls + 1, t + float(e["dur"]))
    rows = sorted(((op, c, t) for op, (c, t) in total.items()), key=lambda r: -r[2])
    return rows[:n]
