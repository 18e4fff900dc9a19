"""CPU kernels of ai.onnx, one module per operator family (elementwise, reduction, shape, nn, ...).

Each family module exposes ``KERNELS: dict[(domain, op_type, since_version), kernel]``;
:func:`all_kernels` merges them.  No kernels exist yet (evaluation is issue #5): every
ai.onnx operator is reported unsupported on ``cpu`` until its family lands.
"""

from __future__ import annotations

import importlib

FAMILIES: tuple[str, ...] = ()


def all_kernels() -> dict:
    table: dict = {}
    for family in FAMILIES:
        table.update(importlib.import_module(f"{__name__}.{family}").KERNELS)
    return table
