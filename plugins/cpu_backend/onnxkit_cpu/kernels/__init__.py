"""CPU kernels of ai.onnx and the preview domains, one module per operator family.

Each family module (``elementwise.py``, ``reduction.py``, ``shape.py``, ``nn_conv.py``, ...)
exposes ``KERNELS``, an :class:`onnxkit.runtime.KernelTable` keyed by
``(domain, op_type, since_version)``; :func:`all_kernels` merges every module of this
package.  To find the kernel of an operator: ``grep -rn '"OpName"' plugins/cpu_backend``.
"""

from __future__ import annotations

import importlib
import pkgutil


def family_modules() -> list:
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def all_kernels() -> dict:
    table: dict = {}
    for family in family_modules():
        module = importlib.import_module(f"{__name__}.{family}")
        for key, factory in module.KERNELS.items():
            if key in table:
                raise RuntimeError(f"kernel {key} is defined in two families ({family} and another)")
            table[key] = factory
    return table
