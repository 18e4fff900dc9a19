"""``onnxkit run MODEL --input name=file.npy ... [--output-dir DIR] [--backend NAME] [--strict]``.

``--strict`` is ``InferenceSession(strict=True)``: every violation refuses the model or the
run, warnings included (Clause 8.6); without it warnings are reported and the model runs."""

from __future__ import annotations

import os

import numpy as np

from ..errors import OnnxkitError


def add_parser(sub):
    p = sub.add_parser("run", help="evaluate a model on inputs given as .npy (or .pb) files")
    p.add_argument("model", metavar="MODEL")
    p.add_argument("--input", "-i", action="append", default=[], metavar="NAME=FILE",
                   help="an input value: a .npy file, or a .pb value file of the ONNX test package")
    p.add_argument("--output-dir", "-o", metavar="DIR", help="write each output to DIR/<name>.npy")
    p.add_argument("--backend", default="cpu")
    p.add_argument("--strict", action="store_true",
                   help="refuse on any violation, warnings included (Clause 8.6); default: report warnings and run")
    return p


def _read(path: str, vi):
    if path.endswith(".npy"):
        return np.load(path, allow_pickle=False)
    from ..api import load_value

    return load_value(path, type=vi.type if vi is not None else None)


def run(args) -> int:
    from ..runtime import InferenceSession

    sess = InferenceSession(args.model, args.backend, strict=args.strict)
    by_name = {vi.name: vi for vi in sess.model.graph.input}
    feed = {}
    for item in args.input:
        name, sep, path = item.partition("=")
        if not sep:
            raise OnnxkitError(f"--input needs NAME=FILE, got {item!r}")
        if not os.path.exists(path):
            raise OnnxkitError(f"input file {path} does not exist")
        feed[name] = _read(path, by_name.get(name))
    outputs = sess.run(None, feed)
    names = [o.name for o in sess.get_outputs()]
    if args.output_dir:
        os.makedirs(args.output_dir, exist_ok=True)
    for name, value in zip(names, outputs):
        if isinstance(value, np.ndarray):
            print(f"{name}: {value.dtype}{list(value.shape)}")
            print(np.array2string(value, threshold=20, edgeitems=3))
            if args.output_dir:
                np.save(os.path.join(args.output_dir, f"{name}.npy"), value, allow_pickle=False)
        else:
            print(f"{name}: {value!r}")
    return 0
