"""The real-world corpus cache: built by ``python tests/corpus/build.py [--out DIR] [--force] [--results]``.

The sources (``corpus_wheels``, ``corpus_torch``, ``corpus_hf``, ``corpus_ml``,
``corpus_onnxscript``, ``corpus_authored``) write ``<out>/<name>.onnx``; this module adds each model's fixed inputs
(``<name>.inputs.npz``) and ``manifest.json`` (name, source, producer, producer version, file
size, sha256, inputs with dtype and shape, a note).  The folder is ``$ONNXKIT_CORPUS`` or
``<repo>/.cache/corpus``.

Each source is cached on its own (``<source>.json``, keyed by a hash of its code and the
producers' versions: ``source_key``), so editing one source rebuilds only it and those after it.

``--results`` also runs every model (``corpus_outcome.run_corpus``) and writes
``tests/corpus/RESULTS.md``, the table docs/corpus.md copies.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402

REPO = HERE.parent.parent
SOURCES = ("corpus_wheels", "corpus_torch", "corpus_hf", "corpus_ml", "corpus_onnxscript",  # in build order
           "corpus_authored")
READS = {"corpus_authored": ("corpus_torch", "corpus_hf")}  # sources whose files a source reads
PRODUCER_PACKAGES = ("torch", "transformers", "onnxscript", "spox", "skl2onnx", "onnxmltools", "lightgbm",
                     "scikit-learn", "onnxruntime", "onnx", "numpy")


def corpus_dir() -> Path:
    """Where the corpus lives: ``$ONNXKIT_CORPUS`` or ``<repo>/.cache/corpus``."""
    env = os.environ.get("ONNXKIT_CORPUS")
    return Path(env) if env else REPO / ".cache" / "corpus"


def _versions() -> bytes:
    out = []
    for pkg in PRODUCER_PACKAGES:
        try:
            out.append(f"{pkg}=={version(pkg)}")
        except PackageNotFoundError:
            out.append(f"{pkg} missing")
    return ";".join(out).encode()


def source_key(source: str) -> str:
    """A hash of ``source``, the sources whose files it reads (``READS``), the shared module and
    the installed producers' versions: a changed key means rebuild."""
    h = hashlib.sha256(_versions())
    deps = (source, *READS.get(source, ()), "corpus_common")
    for mod in deps:
        h.update(mod.encode() + (HERE / f"{mod}.py").read_bytes())
    return h.hexdigest()[:16]


def _build_source(out: Path, source: str, log) -> list[dict]:
    """Build one source into ``out``; its part of the manifest, also written to ``<source>.json``."""
    import importlib

    t0, key = time.perf_counter(), source_key(source)  # the key of the code that is about to run
    models = []
    for e in importlib.import_module(source).build(out):
        path = out / f"{e.name}.onnx"
        np.savez(out / f"{e.name}.inputs.npz", **e.inputs)
        models.append({"name": e.name, "source": source, "producer": e.producer,
                       "producer_version": e.producer_version, "file": path.name, "size": path.stat().st_size,
                       "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                       "inputs": {k: {"dtype": str(v.dtype), "shape": list(v.shape)} for k, v in e.inputs.items()},
                       "note": e.note})
    seconds = round(time.perf_counter() - t0, 1)
    (out / f"{source}.json").write_text(json.dumps({"key": key, "seconds": seconds,
                                                    "models": models}, indent=1) + "\n")
    log(f"{source}: {len(models)} models built in {seconds} s")
    return models


def ensure_corpus(out: Path | None = None, log=print, force: bool = False) -> tuple[Path, dict]:
    """The corpus folder and its manifest; each source whose key changed (or all, with
    ``force``) is built anew, the others are reused.  Writes ``manifest.json``."""
    out = out or corpus_dir()
    out.mkdir(parents=True, exist_ok=True)
    models, seconds = [], 0.0
    for source in SOURCES:
        part = None
        try:
            part = json.loads((out / f"{source}.json").read_text())
        except (OSError, ValueError):
            pass
        if force or part is None or part.get("key") != source_key(source) \
                or not all((out / m["file"]).exists() for m in part["models"]):
            (out / f"{source}.json").unlink(missing_ok=True)
            part = {"models": _build_source(out, source, log)}
            part["seconds"] = json.loads((out / f"{source}.json").read_text())["seconds"]
        models += part["models"]
        seconds += part["seconds"]
    names = [m["name"] for m in models]
    assert len(names) == len(set(names)), "corpus model names must be unique"
    manifest = {"build_seconds": round(seconds, 1), "models": models}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return out, manifest


def load_inputs(out: Path, name: str) -> dict[str, np.ndarray]:
    """The fixed input set of model ``name``."""
    with np.load(out / f"{name}.inputs.npz") as z:
        return {k: z[k] for k in z.files}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="cache folder (default: .cache/corpus)")
    parser.add_argument("--force", action="store_true", help="rebuild even if the cache is current")
    parser.add_argument("--results", action="store_true", help="run every model and write tests/corpus/RESULTS.md")
    args = parser.parse_args(argv)
    out = args.out or corpus_dir()
    manifest = ensure_corpus(out, force=args.force)[1]
    print(f"{len(manifest['models'])} models in {out} (built in {manifest['build_seconds']} s)")
    if args.results:
        from corpus_outcome import run_corpus, write_results

        results = run_corpus(out, manifest)
        write_results(HERE / "RESULTS.md", manifest, results)
        print(f"wrote {HERE / 'RESULTS.md'}")
    return 0


