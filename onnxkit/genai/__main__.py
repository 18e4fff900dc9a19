"""``python -m onnxkit.genai script.py args`` / ``python -m onnxkit.genai -m module args``: run a
program written for onnxruntime-genai with onnxkit standing in for it
(:func:`onnxkit.install_as_onnxruntime_genai`), the program unchanged.  Child Python processes it
starts stand in too (``PYTHONPATH`` gets :func:`~onnxkit.genai.install.shim_dir`'s folder)."""

from __future__ import annotations

import os
import runpy
import sys

USAGE = ("usage: python -m onnxkit.genai script.py [args ...]\n"
         "       python -m onnxkit.genai -m module [args ...]\n"
         "runs the program with onnxkit standing in for onnxruntime_genai")


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr if not argv else sys.stdout)
        return 2 if not argv else 0
    from .install import ENVIRON, child_environment, install_as_onnxruntime_genai

    os.environ.update({k: v for k, v in child_environment().items() if k in ("PYTHONPATH", ENVIRON)})
    install_as_onnxruntime_genai()
    if argv[0] == "-m":
        if len(argv) < 2:
            print(USAGE, file=sys.stderr)
            return 2
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        return 0
    script = argv[0]
    if not os.path.exists(script):
        print(f"onnxkit.genai: no such script: {script}", file=sys.stderr)
        return 2
    sys.argv = argv
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
