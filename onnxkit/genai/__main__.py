"""``python -m onnxkit.genai script.py args`` / ``python -m onnxkit.genai -m module args``: run a
program written for onnxruntime-genai with onnxkit standing in for it
(:func:`onnxkit.install_as_onnxruntime_genai`), the program unchanged.  Child Python processes it
starts stand in too (``PYTHONPATH`` gets :func:`~onnxkit.genai.install.shim_dir`'s folder)."""

from __future__ import annotations

import sys

USAGE = ("usage: python -m onnxkit.genai script.py [args ...]\n"
         "       python -m onnxkit.genai -m module [args ...]\n"
         "runs the program with onnxkit standing in for onnxruntime_genai")


def main(argv=None) -> int:
    from onnxkit.ort.install import run_program

    from .install import ENVIRON, child_environment, install_as_onnxruntime_genai

    def env():
        return {k: v for k, v in child_environment().items() if k in ("PYTHONPATH", ENVIRON)}

    return run_program(sys.argv[1:] if argv is None else argv, "onnxkit.genai", USAGE, install_as_onnxruntime_genai,
                       env)


if __name__ == "__main__":
    sys.exit(main())
