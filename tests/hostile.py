"""Hostile inputs of issue #18 (and #12 item 4), and a runner that tries them under a cap.

Builders return octets (or write files) with onnxkit's own IR and writer, so they do not
depend on the ``onnx`` package; each grows with its size argument, which the growth tests
double.  :func:`run_capped` runs a snippet in a fresh interpreter under an address-space
cap (``RLIMIT_AS``) and a wall-clock limit and reports what happened, how long it took and
the peak resident memory, so a hang or an allocation the limits did not allow fails the
test instead of the suite.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from onnxkit import ir
from onnxkit.api import to_bytes
from onnxkit.wire.varint import encode_varint

GiB = 1 << 30
ROOT = Path(__file__).resolve().parent.parent


def ld(tag: int, body: bytes) -> bytes:
    """A length-delimited field (wire type 2) with tag ``tag``."""
    return encode_varint(tag << 3 | 2) + encode_varint(len(body)) + body


# -- decoder patterns ---------------------------------------------------------------------------

def nested_repeated_type(levels: int, copies: int = 8) -> bytes:
    """A TypeProto ``sequence_type.elem_type`` chain ``levels`` deep in which every level's
    singular message is repeated ``copies`` times (12.3.2 merges them): linear in size,
    quadratic-and-worse for a decoder that re-decodes the concatenation per copy."""
    t = ld(1, b"\x08\x01")  # tensor_type { elem_type: FLOAT }
    for _ in range(levels):
        t = ld(4, ld(1, t) + ld(1, b"") * copies) + ld(4, b"") * copies
    return t


def repeated_graph(copies: int) -> bytes:
    """A ModelProto whose singular ``graph`` occurs ``copies`` times, each adding one node."""
    return ld(7, ld(1, ld(4, b"Relu"))) * copies


def empty_nodes(count: int) -> bytes:
    """A ModelProto whose graph holds ``count`` empty NodeProto entries (2 octets each)."""
    return ld(7, b"\x0a\x00" * count)


def empty_initializers(count: int) -> bytes:
    """A ModelProto whose graph holds ``count`` empty TensorProto initializers (2 octets each)."""
    return ld(7, b"\x2a\x00" * count)


# -- models ----------------------------------------------------------------------------------------

def _vi(name: str, shape=(2,)) -> ir.ValueInfo:
    return ir.ValueInfo(name, ir.tensor_type(1, list(shape)))


def relu_chain(n: int) -> ir.Model:
    """A graph of ``n`` Relu nodes in a chain."""
    nodes = [ir.Node(input=[f"x{i}"], output=[f"x{i + 1}"], op_type="Relu", name=f"n{i}") for i in range(n)]
    g = ir.Graph(node=nodes, name="chain", input=[_vi("x0", (4,))], output=[_vi(f"x{n}", (4,))])
    return ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 17)], graph=g)


def function_chain(n: int, innermost: str = "Relu", fan_out: int = 1) -> ir.Model:
    """A model calling F0, where Fi calls F(i+1) (``fan_out`` times, in sequence) and the last
    calls ``innermost``: a chain of ``n`` model-local functions (8.4), a few hundred octets
    per level; with ``fan_out=2`` evaluating it expands 2**n calls."""
    imports = [ir.OperatorSetId("", 17), ir.OperatorSetId("local", 1)]
    fns = []
    for i in range(n):
        last = i + 1 == n
        names = ["x"] + [f"t{k}" for k in range(1, fan_out)] + ["y"]
        body = [ir.Node(input=[names[k]], output=[names[k + 1]], op_type=innermost if last else f"F{i + 1}",
                        domain="" if last else "local") for k in range(fan_out)]
        fns.append(ir.Function(name=f"F{i}", domain="local", input=["x"], output=["y"], node=body,
                               opset_import=list(imports)))
    g = ir.Graph(node=[ir.Node(input=["X"], output=["Y"], op_type="F0", domain="local")], name="g",
                 input=[_vi("X")], output=[_vi("Y")])
    return ir.Model(ir_version=10, opset_import=imports, graph=g, functions=fns)


def scaled_model(w: float) -> ir.Model:
    """Y = X * W with W = [w] * 4 as an initializer in raw_data (the rewrite/truncate cases)."""
    import numpy as np

    W = ir.Tensor(dims=[4], data_type=1, name="W", raw_data=np.full(4, w, np.float32).tobytes())
    g = ir.Graph(node=[ir.Node(input=["X", "W"], output=["Y"], op_type="Mul")], name="g", initializer=[W],
                 input=[_vi("X", (4,))], output=[_vi("Y", (4,))])
    return ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 17)], graph=g)


def model_bytes(model: ir.Model) -> bytes:
    return to_bytes(model)


# -- the capped runner -------------------------------------------------------------------------------

_PRELUDE = """
import json, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, ({cap}, {cap}))
sys.path.insert(0, {tests!r})
import onnxkit
from onnxkit.errors import OnnxkitError
result = {{}}
def peak_mib():
    # VmHWM: this process's own peak resident memory (ru_maxrss would carry the forking parent's)
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
def timed(fn):
    # CPU seconds, not wall: what the case costs, whatever else the machine runs (a hang that
    # waits is the wall-clock limit's to catch)
    t0 = time.process_time()
    try:
        value = fn()
        result.update(outcome="ok", value=value)
    except OnnxkitError as exc:
        result.update(outcome="error", error=type(exc).__name__, message=str(exc)[:2000],
                      limit=getattr(exc, "limit", None), code=getattr(exc, "code", None))
    result["seconds"] = time.process_time() - t0
    return result
"""


def run_capped(snippet: str, *, cap: int = 4 * GiB, timeout: float = 60.0) -> dict:
    """Run ``snippet`` (Python; it calls ``timed(fn)`` and may set keys of ``result``) in a new
    interpreter under an address-space ``cap`` and a wall-clock ``timeout``.

    Returns ``result`` plus ``peak_mib`` (peak RSS of the child) and ``base_mib`` (its peak RSS
    before ``timed`` ran, when the snippet records it).  A non-onnxkit exception, a signal or a
    timeout fails the calling test with the child's output.
    """
    code = _PRELUDE.format(cap=cap, tests=str(Path(__file__).resolve().parent)) + textwrap.dedent(snippet) + \
        "\nresult['peak_mib'] = peak_mib()\nprint('RESULT ' + json.dumps(result, default=str))\n"
    env = dict(os.environ)
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                              env=env, cwd=str(ROOT))
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the snippet did not finish within {timeout} s (a hang):\n{snippet}") from None
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise AssertionError(f"the child failed (return code {proc.returncode}):\n{proc.stdout[-3000:]}\n"
                             f"{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])
