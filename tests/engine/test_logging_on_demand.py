"""onnxkit imports logging only when it logs (onnxkit.log.get_logger), and adds its NullHandler
before the first record: a session that logs nothing leaves logging unimported (as onnxruntime's
process does), and an application's unconfigured logging still shows no last-resort copy."""

import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "digits.onnx"


def _run(code: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONNXKIT_")}  # a user's process
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_a_session_that_logs_nothing_imports_no_logging():
    out = _run(
        "import sys, traceback\n"
        "class Watch:\n"  # who imports logging, shown where the test fails
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'logging':\n"
        "            traceback.print_stack(limit=12)\n"
        "        return None\n"
        "sys.meta_path.insert(0, Watch())\n"
        "import numpy as np, onnxkit\n"
        f"s = onnxkit.InferenceSession({str(EXAMPLE)!r})\n"
        "s.run(None, {'image': np.zeros((1, 1, 8, 8), np.float32)})\n"
        "print('logging' in sys.modules)\n")
    assert out.stdout.split()[-1] == "False", out.stderr[-3000:]


def test_the_null_handler_is_there_before_the_first_record():
    # logging imported but not configured: a warning on onnxkit's loggers reaches no handler, so
    # logging's last resort would print it; the library's NullHandler keeps stderr clean
    out = _run(
        "import logging\n"
        "from onnxkit.log import get_logger\n"
        "get_logger('check').warning('probe-one')\n"
        "print(sum(isinstance(h, logging.NullHandler) for h in logging.getLogger('onnxkit').handlers))\n"
        "get_logger('run').warning('probe-two')\n"
        "print(sum(isinstance(h, logging.NullHandler) for h in logging.getLogger('onnxkit').handlers))\n")
    assert "probe" not in out.stderr, out.stderr
    assert out.stdout.split() == ["1", "1"], out.stdout  # added once


def test_a_configured_application_sees_the_records_and_the_policy_line_once():
    out = _run(
        "import logging, warnings\n"
        "logging.basicConfig(level=logging.WARNING, format='LOG %(name)s %(message)s')\n"
        "from onnxkit.runtime import policy\n"
        "from onnxkit.diagnostics import warning\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    policy.report([warning('ir-version-missing', '14.1', 'no ir_version')], 'model m')\n"
        "print(len(caught))\n")
    logged = [line for line in out.stderr.splitlines() if line.startswith("LOG onnxkit.check ")]
    assert len(logged) == 1 and "ir-version-missing" in logged[0], out.stderr
    assert out.stdout.split()[-1] == "1"  # a violation: also one ConformanceWarning


def test_severity_levels_are_loggings():
    import logging

    from onnxkit.log import SEVERITY_LEVELS, severity_to_level

    assert SEVERITY_LEVELS == {0: logging.DEBUG, 1: logging.INFO, 2: logging.WARNING, 3: logging.ERROR,
                               4: logging.CRITICAL}
    assert severity_to_level(-1) == logging.WARNING
