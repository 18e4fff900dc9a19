"""Generated compiled loops of ai.onnxkit Elementwise regions (overrides/fused_elementwise.py).

:func:`region_loop` writes, for one region body (a graph of the operators of :data:`STEPS`) and
one broadcast layout of its inputs, the Python source of one loop computing every element of
the region's result from its inputs' elements at that position, and hands it to
:mod:`onnxkit_cpu.compiled` as a :class:`~onnxkit_cpu.compiled.Lazy` (the first-run policy, the
on-disk cache and the options of every compiled loop).  The source is a function of the body's
operators, their order and the layout alone (no name of the model, no constant but a Pow's
exponent); a loop is made once per distinct source in a process (:data:`_MADE`), and the source
is written to a file named by its SHA-256 digest in :func:`source_dir` (numba caches machine code
only of a function read from a file; a file there holding other text is written again).

**The loop** ``region(lo, hi, n, y, a_0, ..., a_k)`` computes the flat elements ``[lo, hi)`` of
the float32 result ``y`` (C order, last extent ``n``); each ``a_i`` is a flat C-contiguous
float32 array: the full result shape (layout ``"F"``), one element (``"S"``), ``n`` elements
along the last axis (``"V"``) or one element per row (``"R"``).  It walks the rows the block
covers and, along each, the elements in it (through slices of the row: indices LLVM knows to be
in range, so the loop over a row vectorizes); element ``(r, j)`` reads ``a_i[r n + j]``,
``a_i[0]``, ``a_i[j]`` or ``a_i[r]``.  Each element is computed alone, so any split of
``[lo, hi)`` gives the same bits.

**Precision: bit-identical to the unfused plan.**  Each step is the float32 operation the cpu
kernel of its node performs, in the node's operand order, every intermediate a float32 value
(no fast-math flag: nothing is reassociated or contracted): ``Add``, ``Sub``, ``Mul``, ``Div``
(IEEE float32 arithmetic, as numpy's ufuncs), ``Neg``, ``Abs`` (the sign bit), ``Sqrt``
(correctly rounded, as numpy's), ``Reciprocal`` (``1 / x``), ``Relu`` (numpy's ``maximum(x,
0)``: NaN passes, -0 gives +0), ``Pow`` by 2, 3 or 0.5 (``x * x``, ``(x * x) * x``, ``sqrt(x)``:
the cpu Pow's small powers), ``Sigmoid`` and ``Tanh`` (onnxruntime's MLAS rational functions
with true fused multiply-adds, the sequence of ``onnxkit_cpu.compiled.activation``'s MLAS loops,
which are bit-identical to the numpy bodies).
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Optional

import numpy as np

from onnxkit.plugin import is_default_domain
from onnxkit_default_domain.api import MLAS_LOGISTIC, MLAS_TANH
from onnxkit_cpu.compiled import Lazy, kernel

__all__ = ["region_loop", "source_of", "source_dir", "STEPS", "LAYOUTS"]

#: the operators a region body may hold (the optimizer's ``elementwise`` pass takes no other)
STEPS = frozenset(("Add", "Sub", "Mul", "Div", "Pow", "Neg", "Abs", "Sqrt", "Reciprocal", "Relu", "Sigmoid",
                   "Tanh"))
#: the broadcast layouts of an input (module docstring)
LAYOUTS = frozenset("FSVR")
_BINARY = {"Add": "+", "Sub": "-", "Mul": "*", "Div": "/"}
_MADE: dict = {}
_lock = threading.Lock()


def _f32(v) -> str:
    """A float32 constant as source text, exactly (its float64 value's hexadecimal form)."""
    return f"_F(float.fromhex({float(np.float32(v)).hex()!r}))"


def _constants() -> list:
    """The source lines of the MLAS coefficients (:mod:`onnxkit_cpu.compiled.activation`'s)."""
    lines = []
    for tag, (bounds, p, q) in (("LG", MLAS_LOGISTIC), ("TH", MLAS_TANH)):
        for name, values in (("LO_HI", bounds), ("P", p), ("Q", q)):
            lines.append(f"_{tag}_{name} = ({', '.join(_f32(v) for v in values)},)")
    return lines


def _horner(coefficients: str, count: int, v2: str) -> str:
    """``fma(...fma(v2, c0, c1), v2, c2)..., v2, c_{count-1})`` over the named tuple's entries."""
    expr = f"_fma({v2}, {coefficients}[0], {coefficients}[1])"
    for k in range(2, count):
        expr = f"_fma({expr}, {v2}, {coefficients}[{k}])"
    return expr


def _rational(tag: str, a: str, t: str, pad: str) -> list:
    """The MLAS sequence of Sigmoid (``tag`` LG) or Tanh (TH) of ``a`` into ``t``."""
    p, q = (MLAS_LOGISTIC if tag == "LG" else MLAS_TANH)[1:]
    lines = [f"{pad}{t} = {a}",
             f"{pad}if {t} < _{tag}_LO_HI[0]:", f"{pad}    {t} = _{tag}_LO_HI[0]",
             f"{pad}if {t} > _{tag}_LO_HI[1]:", f"{pad}    {t} = _{tag}_LO_HI[1]",
             f"{pad}{t}_2 = {t} * {t}",
             f"{pad}{t}_p = {_horner(f'_{tag}_P', len(p), f'{t}_2')}",
             f"{pad}{t}_q = {_horner(f'_{tag}_Q', len(q), f'{t}_2')}"]
    if tag == "LG":
        lines += [f"{pad}{t} = ({t}_p * {t}) / {t}_q + _HALF", f"{pad}if {t} < _ZERO:", f"{pad}    {t} = _ZERO"]
    else:
        lines.append(f"{pad}{t} = ({t}_p * {t}) / {t}_q")
    return lines


def _steps(body, names: dict, pad: str) -> Optional[list]:
    """The element's statements, each node of ``body`` one value ``t<k>``; None for a body this
    generator does not take."""
    powers = {t.name: t.numpy() for t in body.initializer}
    lines = []
    for k, node in enumerate(body.node):
        if node.op_type not in STEPS or not is_default_domain(node.domain) or len(node.output) != 1:
            return None
        t = f"t{k}"
        args = [names.get(i) for i in node.input]
        if node.op_type == "Pow":
            e = powers.get(node.input[1])
            if args[0] is None or e is None or e.size != 1:
                return None
            e = float(e.reshape(-1)[0])
            expr = {2.0: f"{args[0]} * {args[0]}", 3.0: f"({args[0]} * {args[0]}) * {args[0]}",
                    0.5: f"np.sqrt({args[0]})"}.get(e)
            if expr is None:
                return None
            lines.append(f"{pad}{t} = {expr}")
        elif None in args:
            return None
        elif node.op_type in _BINARY:
            lines.append(f"{pad}{t} = {args[0]} {_BINARY[node.op_type]} {args[1]}")
        elif node.op_type in ("Sigmoid", "Tanh"):
            lines += _rational("LG" if node.op_type == "Sigmoid" else "TH", args[0], t, pad)
        else:
            a = args[0]
            lines.append(pad + t + " = " + {"Neg": f"-{a}", "Abs": f"abs({a})", "Sqrt": f"np.sqrt({a})",
                                            "Reciprocal": f"_ONE / {a}",
                                            "Relu": f"{a} if {a} > _ZERO else ({a} if {a} != {a} else _ZERO)"}[node.op_type])
        names[node.output[0]] = t
    return lines if body.output and body.output[0].name in names else None


def source_of(body, layouts: str) -> Optional[str]:
    """The loop's source for ``body`` with its inputs in ``layouts`` (one of :data:`LAYOUTS` per
    input, in order), or None where the body or the layouts are not this generator's."""
    if len(layouts) != len(body.input) or not set(layouts) <= LAYOUTS:
        return None
    args = [f"a{i}" for i in range(len(layouts))]
    names = {vi.name: f"x{i}" for i, vi in enumerate(body.input)}
    steps = _steps(body, names, " " * 12)
    if steps is None:
        return None
    head = [f"    x{i} = a{i}[0]" for i, k in enumerate(layouts) if k == "S"]
    rows = [f"        x{i} = a{i}[r]" for i, k in enumerate(layouts) if k == "R"]
    spans = [f"        s{i} = a{i}[i:base + j1]" if k == "F" else f"        s{i} = a{i}[j0:j1]"
             for i, k in enumerate(layouts) if k in "FV"]
    elements = [f"            x{i} = s{i}[k]" for i, k in enumerate(layouts) if k in "FV"]
    return "\n".join([
        '"""One ai.onnxkit Elementwise region: generated by onnxkit_cpu.compiled.fused_elementwise."""',
        "import numpy as np",
        "_F = np.float32",
        f"_ZERO, _ONE, _HALF = {_f32(0.0)}, {_f32(1.0)}, {_f32(0.5)}",
        *_constants(),
        "_fma = None  # the fused multiply-add intrinsic, bound before the first call",
        "",
        "",
        f"def region(lo, hi, n, y, {', '.join(args)}):",
        *head,
        "    i = lo",
        "    while i < hi:",
        "        r = i // n",
        "        base = r * n",
        "        j0 = i - base",
        "        j1 = min(hi - base, n)",
        *rows,
        "        out = y[i:base + j1]",
        *spans,
        "        for k in range(j1 - j0):",
        *elements,
        *steps,
        f"            out[k] = {names[body.output[0].name]}",
        "        i = base + j1",
        ""])


def source_dir() -> str:
    """Where the generated sources are written: ``$ONNXKIT_FUSED_DIR`` where set, else the user's
    cache folder (``$XDG_CACHE_HOME`` or ``~/.cache``) joined with ``onnxkit/fused_elementwise``."""
    found = os.environ.get("ONNXKIT_FUSED_DIR", "").strip()
    if found:
        return found
    return os.path.join(os.getenv("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "onnxkit", "fused_elementwise")


def _sha256(text: str) -> str:
    """The SHA-256 hex digest of ``text`` (CPython's built-in module, not hashlib: no OpenSSL load)."""
    for module in ("_sha256", "_sha2"):
        try:
            return __import__(module).sha256(text.encode()).hexdigest()
        except (ImportError, AttributeError):
            continue
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


def _load(source: str) -> Optional[Lazy]:
    """A :class:`Lazy` of the ``region`` function of ``source`` read from its file; None where the
    file cannot be written."""
    import importlib.util

    name = f"onnxkit_region_{_sha256(source)[:32]}"
    folder = source_dir()
    path = os.path.join(folder, name + ".py")
    try:
        with open(path, encoding="utf-8") as f:
            held = f.read()
    except OSError:
        held = None
    if held != source:
        try:
            os.makedirs(folder, exist_ok=True)
            partial = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
            with open(partial, "w", encoding="utf-8") as f:
                f.write(source)
            os.replace(partial, path)
        except OSError:
            return None
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module       # numba reads the function's module by name
    spec.loader.exec_module(module)
    return kernel(module.region)


def region_loop(body, layouts: str):
    """The compiled loop of ``body`` in ``layouts`` (module docstring), or None where compiled
    loops are off or deferred (:meth:`~onnxkit_cpu.compiled.Lazy.get`), the body or layouts are
    not this generator's, or its source file cannot be written."""
    source = source_of(body, layouts)
    if source is None:
        return None
    with _lock:
        lazy = _MADE.get(source)
        if lazy is None:
            lazy = _MADE[source] = _load(source) or False
    if not lazy:
        return None
    compiled = lazy.get()
    if compiled is not None:
        glob = lazy.fn.__globals__
        if glob["_fma"] is None:
            from onnxkit_cpu.compiled.activation import fma_intrinsic

            glob["_fma"] = fma_intrinsic()
    return compiled
