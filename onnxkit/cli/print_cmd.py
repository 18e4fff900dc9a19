"""``onnxkit print MODEL [-o FILE]``: the model in the ONNX textual syntax (``onnx.parser`` reads it back).

Every initializer is printed with all its values, so the text of a large model is large;
external data is read to print it.  See :mod:`onnxkit.printer` for what the syntax cannot say.
"""

from __future__ import annotations

import sys

from .paths import require_model_file


def add_parser(sub):
    p = sub.add_parser("print", help="print a model in the ONNX textual syntax",
                       description="print a model in the ONNX textual syntax, which onnx.parser reads back.")
    p.add_argument("model", metavar="MODEL", help="the model file (.onnx)")
    p.add_argument("-o", "--output", metavar="FILE", help="write the text to FILE instead of standard output")
    return p


def run(args) -> int:
    from ..api import load
    from ..printer import to_text

    require_model_file(args.model)
    text = to_text(load(args.model))
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)
    return 0
