"""Write the index of lazily loaded kernel and inference packages from their family modules
(:mod:`onnxkit.plugin.lazy`): ``_kernel_index.py`` for a kernel package (tables ``KERNELS``),
``_function_index.py`` for an inference package (tables ``FUNCTIONS``).

    python tools/kernel_index.py                       # every package that keeps one
    python tools/kernel_index.py onnxkit_cpu.overrides # just this one (its kind: its tables)

tests/plugins/test_kernel_index.py fails when an index and its package's tables disagree.
"""

from __future__ import annotations

import sys

from onnxkit.plugin.lazy import write_index

#: the packages whose kernels load lazily (asserted by tests/plugins/test_kernel_index.py)
KERNEL_PACKAGES = ("onnxkit_cpu.overrides", "onnxkit_default_domain.kernels", "onnxkit_gpu.overrides",
                   "onnxkit_microsoft.kernels", "onnxkit_ml.kernels")
#: the packages whose inference functions load lazily (asserted by tests/plugins/test_kernel_index.py)
FUNCTION_PACKAGES = ("onnxkit_default_domain.inference", "onnxkit_microsoft.inference", "onnxkit_ml.inference")
#: ``{package: table}`` of both
PACKAGES = {**dict.fromkeys(KERNEL_PACKAGES, "KERNELS"), **dict.fromkeys(FUNCTION_PACKAGES, "FUNCTIONS")}


def main(argv: list) -> int:
    for package in argv or PACKAGES:
        print(write_index(package, PACKAGES.get(package)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
