#!/usr/bin/env bash
# The gpu backend's device check (issue #13): its tests, the node and light vectors on gpu,
# and a speed table of a few light models, gpu vs cpu backend (median of 5).
#
#   ONNXKIT_GPU_DEVICE=cuda benchmarks/gpu_check.sh      # on a machine with a CUDA device
#   benchmarks/gpu_check.sh                              # unset: CUDA where torch sees one, else torch's CPU device
#
# Asking for cuda where torch sees no CUDA device stops at once with exit status 2: the check
# never runs silently on the CPU.  Extra arguments go to benchmarks/gpu_check.py (--vectors DIR,
# --models a,b, --repeat N).  Needs torch, onnx (for the vectors) and pytest; where onnxkit and
# its plugins are not installed, they are installed into a temporary folder first (no network).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1

"$PY" - <<'EOF' || exit 2
import os, sys
import torch
want = os.environ.get("ONNXKIT_GPU_DEVICE", "")
if want.startswith("cuda") and not torch.cuda.is_available():
    sys.exit(f"gpu_check: ONNXKIT_GPU_DEVICE={want!r} but torch {torch.__version__} sees no CUDA device")
print(f"gpu_check: ONNXKIT_GPU_DEVICE={want or '(unset)'}; torch {torch.__version__}; "
      f"CUDA available: {torch.cuda.is_available()}")
EOF

if ! "$PY" -c "import array_api_compat, array_api_extra" 2>/dev/null; then
    echo "gpu_check: array-api-compat and array-api-extra are needed (pip install array-api-compat array-api-extra," \
         "or PIP_FIND_LINKS=DIR with their wheels)"
    "$PY" -m pip install -q array-api-compat array-api-extra || exit 2
fi

if ! "$PY" -c "import sys; from onnxkit.registry import get_registry; sys.exit('gpu' not in get_registry().backends)" 2>/dev/null; then
    SITE="$(mktemp -d)/site"
    echo "gpu_check: onnxkit's plugins are not installed here; installing them into $SITE"
    "$PY" -m pip install -q --no-deps --no-build-isolation --no-index --target "$SITE" \
        . plugins/default_domain plugins/ml_domain plugins/cpu_backend plugins/gpu_backend || exit 2
    export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi

status=0
echo "== the gpu backend's tests"
"$PY" -m pytest -q -p no:cacheprovider plugins/gpu_backend/tests plugins/default_domain/tests tests/engine/test_fallback.py || status=1
echo "== vectors and speed"
(cd benchmarks && "$PY" gpu_check.py "$@") || status=$?
echo "gpu_check: exit status $status"
exit $status
