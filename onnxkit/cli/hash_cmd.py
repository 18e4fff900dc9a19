"""``onnxkit hash MODEL``: SHA-256 of the model's canonical form (README, "Canonical form")."""

from __future__ import annotations

from ..api import model_hash


def add_parser(sub):
    p = sub.add_parser("hash", help="SHA-256 of a model's canonical encoding")
    p.add_argument("models", nargs="+", metavar="MODEL", help="one or more model files (.onnx)")
    return p


def run(args) -> int:
    for path in args.models:
        print(f"{model_hash(path)}  {path}")
    return 0
