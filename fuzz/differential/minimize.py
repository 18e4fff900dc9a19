"""Delta debugging of a failing model: the smallest model (greedy) that still fails the same way.

Steps, repeated until none helps (each candidate kept only if :func:`~.oracle.check` gives a
verdict with the same ``key``: status, kind and engine):

1. drop graph outputs (keep at least one), then the nodes nothing reads any more;
2. bypass a node: its first output's readers (and graph outputs) read one of its inputs instead;
3. shrink the symbolic dimensions' extents towards 1 (both shape variants).

Unused initializers and graph inputs go at each step.  Bounded by ``budget`` checks.
"""

from __future__ import annotations

import onnx

from .build import meta, set_meta, output_infos


def _prune(m: onnx.ModelProto) -> onnx.ModelProto:
    g = m.graph
    live = {o.name for o in g.output}
    keep = []
    for n in reversed(list(g.node)):
        if any(o in live for o in n.output):
            keep.append(n)
            live.update(i for i in n.input if i)
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    live.update(i for sub in a.g.node for i in sub.input)
    keep.reverse()
    del g.node[:]
    g.node.extend(keep)
    inits = [t for t in g.initializer if t.name in live]
    del g.initializer[:]
    g.initializer.extend(inits)
    inputs = [vi for vi in g.input if vi.name in live]
    del g.input[:]
    g.input.extend(inputs)
    return m


def _copy(m):
    c = onnx.ModelProto()
    c.CopyFrom(m)
    return c


def _candidates(m: onnx.ModelProto):
    outs = [o.name for o in m.graph.output]
    if len(outs) > 1:
        for name in outs:
            c = _copy(m)
            kept = [o for o in c.graph.output if o.name != name]
            del c.graph.output[:]
            c.graph.output.extend(kept)
            yield _prune(c)
    for k, node in enumerate(m.graph.node):
        if not node.output or not node.input:
            continue
        for src in {i for i in node.input if i}:
            c = _copy(m)
            out = node.output[0]
            del c.graph.node[k]
            for n in c.graph.node:
                n.input[:] = [src if i == out else i for i in n.input]
            names = [src if o.name == out else o.name for o in c.graph.output]
            if len(set(names)) != len(names) or src in {vi.name for vi in c.graph.input} - set():
                if src in names and out in outs:
                    continue
            del c.graph.output[:]
            c.graph.output.extend(output_infos(c, names, False))
            yield _prune(c)
    dims = meta(m)["dims"]
    for p, (a, b) in dims.items():
        if a > 1 or b > 1:
            c = _copy(m)
            d = dict(dims)
            d[p] = [min(a, 1) if a > 1 else a, min(b, 1) if b > 1 else b]
            set_meta(c, "dims", d)
            yield c


def minimize(model: onnx.ModelProto, seed: int, verdict, budget: int = 150) -> onnx.ModelProto:
    """The smallest model found that still fails as ``verdict`` did (``model`` if none)."""
    from .oracle import check

    best, tries = model, 0
    improved = True
    while improved and tries < budget:
        improved = False
        for cand in _candidates(best):
            tries += 1
            if tries > budget:
                break
            try:
                v = check(cand, seed)
            except Exception:  # noqa: BLE001 - a broken candidate is just not kept
                continue
            if v.key == verdict.key:
                best, improved = cand, True
                break
    return best
