"""``onnxkit hash MODEL... [--with-data]``: SHA-256 of the model's canonical form (docs/decisions.md, "Canonical form")."""

from __future__ import annotations

from ..api import model_hash


def add_parser(sub):
    p = sub.add_parser("hash", help="SHA-256 of a model's canonical encoding")
    p.add_argument("models", nargs="+", metavar="MODEL", help="one or more model files (.onnx)")
    p.add_argument("--with-data", action="store_true",
                   help="also cover the contents of every external tensor (not only its reference)")
    return p


def run(args) -> int:
    for path in args.models:
        print(f"{model_hash(path, with_data=args.with_data)}  {path}")
    return 0
