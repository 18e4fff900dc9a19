"""``python -m onnxkit.cli``."""

import sys

from . import main

sys.exit(main())
