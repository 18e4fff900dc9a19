"""Short, readable reprs of IR objects: one line each, lists cut after a few items.

    Node(Conv, name='conv1', inputs=[x, w, b], outputs=[y], attributes=[kernel_shape, pads])
    Model(ir_version=8, opsets={'': 13}, producer='pytorch 2.1', graph='main': 53 nodes, ...)

The full content is in the fields; :func:`onnxkit.to_text` prints a whole model.
"""

from __future__ import annotations

#: How many items of a list a repr shows before "... +N more".
SHOWN = 6


def items(values, shown: int = SHOWN) -> str:
    """``[a, b, c, ... +7 more]`` of already formatted values."""
    values = list(values)
    head = ", ".join(str(v) for v in values[:shown])
    if len(values) > shown:
        head += f", ... +{len(values) - shown} more"
    return f"[{head}]"


def value_info(vi) -> str:
    """``name: type`` of a ValueInfo (``name`` when it has no type)."""
    return vi.name if vi.type is None else f"{vi.name}: {vi.type}"


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def graph_summary(g) -> str:
    """``'main': 53 nodes, 26 initializers, 1 input, 1 output``."""
    return (f"{g.name!r}: {plural(len(g.node), 'node')}, {plural(len(g.initializer), 'initializer')}, "
            f"{plural(len(g.input), 'input')}, {plural(len(g.output), 'output')}")


def short_value(v, limit: int = 60) -> str:
    """A scalar or list attribute value, cut to ``limit`` characters."""
    if isinstance(v, (bytes, bytearray)):
        v = bytes(v).decode("utf-8", errors="replace")
    text = repr(v) if not isinstance(v, list) else items([repr(x) if isinstance(x, bytes) else x for x in v], 8)
    return text if len(text) <= limit else text[:limit - 3] + "..."
