"""The portable kernels' tests: their shared one-node helpers (one_node.py) are importable."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # pytest runs with --import-mode=importlib
    sys.path.insert(0, str(HERE))
