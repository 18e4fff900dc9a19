"""Write the kernel index (``_kernel_index.py``) of lazily loaded kernel packages from their
family modules (:mod:`onnxkit.plugin.lazy`).

    python tools/kernel_index.py                       # every package that keeps one
    python tools/kernel_index.py onnxkit_cpu.overrides # just this one

tests/test_kernel_index.py fails when an index and its package's ``KERNELS`` tables disagree.
"""

from __future__ import annotations

import sys

from onnxkit.plugin.lazy import write_index

#: the packages whose kernels load lazily (asserted by tests/test_kernel_index.py)
PACKAGES = ("onnxkit_cpu.overrides", "onnxkit_default_domain.kernels", "onnxkit_gpu.overrides",
            "onnxkit_microsoft.kernels")


def main(argv: list) -> int:
    for package in argv or PACKAGES:
        print(write_index(package))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
