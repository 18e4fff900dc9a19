"""Generate ``onnxkit_ml/schemas_data.json.gz`` from ``onnx.defs`` (build-time tool).

Domain: ai.onnx.ml (operator sets 1..onnx.defs.onnx_ml_opset_version()).  The shared
generator lives in ``plugins/default_domain/tools/schema_gen_common.py`` and is loaded by
path.  Run from anywhere::

    python plugins/ml_domain/tools/generate_schemas.py
"""

from __future__ import annotations

import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
COMMON = os.path.join(HERE, "..", "..", "default_domain", "tools", "schema_gen_common.py")


def _common():
    spec = importlib.util.spec_from_file_location("schema_gen_common", os.path.normpath(COMMON))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


DOMAINS = ["ai.onnx.ml"]
OUTPUT = os.path.join(os.path.dirname(HERE), "onnxkit_ml", "schemas_data.json.gz")

if __name__ == "__main__":
    sys.exit(_common().main(DOMAINS, OUTPUT))
