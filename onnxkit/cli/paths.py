"""The commands' one check of a model path given on the command line."""

from __future__ import annotations

import os
import stat

from ..errors import OnnxkitError


def why_not_a_model_file(path: str):
    """None if ``path`` names a regular file (or a link to one), else why not, as a phrase:
    "does not exist", "is a directory, not a model file", "is a character device, not a
    regular file", ..."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "does not exist"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a directory, not a model file"
    kind = ("a character device" if stat.S_ISCHR(mode) else "a block device" if stat.S_ISBLK(mode)
            else "a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "not a regular file")
    return f"is {kind}, not a regular file"


def require_model_file(path: str) -> None:
    """Raise :class:`OnnxkitError` ("MODEL does not exist", "... is a directory, ...") unless
    ``path`` names a regular file."""
    why = why_not_a_model_file(path)
    if why is not None:
        raise OnnxkitError(f"{path} {why}")
