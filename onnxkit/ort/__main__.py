"""``python -m onnxkit.ort script.py args`` / ``python -m onnxkit.ort -m module args``: run a
program with onnxkit standing in for onnxruntime (:func:`onnxkit.install_as_onnxruntime`), the
program unchanged.  Child Python processes it starts stand in too (``PYTHONPATH`` gets
:func:`~onnxkit.ort.install.shim_dir`'s folder)."""

from __future__ import annotations

import sys

USAGE = ("usage: python -m onnxkit.ort script.py [args ...]\n"
         "       python -m onnxkit.ort -m module [args ...]\n"
         "runs the program with onnxkit standing in for onnxruntime")


def main(argv=None) -> int:
    from .install import child_environment, install_as_onnxruntime, run_program

    def env():
        return {k: v for k, v in child_environment().items() if k in ("PYTHONPATH", "ONNXKIT_AS_ONNXRUNTIME")}

    return run_program(sys.argv[1:] if argv is None else argv, "onnxkit.ort", USAGE, install_as_onnxruntime, env)


if __name__ == "__main__":
    sys.exit(main())
