"""Generate ``onnxkit_default_domain/schemas_data.json.gz`` from ``onnx.defs`` (build-time tool).

Domains: ai.onnx ('', operator sets 1..onnx.defs.onnx_opset_version()), ai.onnx.preview.training
and ai.onnx.preview.  Run from anywhere::

    python plugins/default_domain/tools/generate_schemas.py
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import schema_gen_common  # noqa: E402

DOMAINS = ["", "ai.onnx.preview.training", "ai.onnx.preview"]
OUTPUT = os.path.join(os.path.dirname(HERE), "onnxkit_default_domain", "schemas_data.json.gz")

if __name__ == "__main__":
    sys.exit(schema_gen_common.main(DOMAINS, OUTPUT))
