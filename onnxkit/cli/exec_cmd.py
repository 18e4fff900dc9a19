"""``onnxkit exec -- CMD [ARGS...]``: run a command with onnxkit standing in for onnxruntime.

The command's Python processes (and theirs) find onnxkit's ``onnxruntime`` first on
``PYTHONPATH`` (:func:`onnxkit.ort.install.shim_dir`), so ``import onnxruntime`` in them gives
:mod:`onnxkit.ort`.  The exit status is the command's (127 when it cannot be started).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys


def add_parser(sub):
    p = sub.add_parser("exec", help="run a command with onnxkit standing in for onnxruntime",
                       usage="onnxkit exec -- CMD [ARGS ...]")
    p.add_argument("cmd", nargs="...", metavar="CMD [ARGS ...]", help="the command to run")
    return p


def run(args) -> int:
    from ..ort.install import child_environment

    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        print("onnxkit exec: error: no command given (onnxkit exec -- CMD [ARGS ...])", file=sys.stderr)
        return 2
    env = child_environment()
    tmp = env["PYTHONPATH"].split(os.pathsep, 1)[0]
    try:
        return subprocess.call(cmd, env=env)
    except FileNotFoundError:
        print(f"onnxkit exec: error: no such command: {cmd[0]}", file=sys.stderr)
        return 127
    except KeyboardInterrupt:
        return 130
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
