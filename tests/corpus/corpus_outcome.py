"""Running a corpus model on onnxkit and onnxruntime, and naming the outcome.

``run_model(path, inputs)`` creates ``onnxkit.InferenceSession(path)`` with its defaults and
an onnxruntime session (CPU, default options), feeds both the same inputs, and returns an
:class:`Outcome` whose ``kind`` is one of

- ``match``: every output agrees with onnxruntime's: same kind of value, same dtype and shape,
  numbers within ``|a - b| <= ATOL + RTOL * |b|``, strings and integers equal;
- ``mismatch``: onnxkit ran but an output differs (``detail`` says which and how);
- ``unsupported``: session creation raised ``UnsupportedOperatorError``; ``detail`` lists the
  operators it names as ``domain::op_type``, sorted, comma-separated;
- ``refused``: onnxkit raised one of its own errors (``OnnxkitError``) at creation or at run;
  ``detail`` names the stage, the error class and the checker codes of its diagnostics;
- ``crash``: any other exception: an onnxkit bug.

An expected outcome (``expected.toml``) is written ``"match"`` or ``"<kind>: <text>"``.
:func:`agrees` says whether an outcome is the expected one: the kind must be equal; for
``unsupported`` the operator list must be equal; for the others the text must occur in the
outcome's detail or message.
"""

from __future__ import annotations

import math
import traceback
from dataclasses import dataclass
from pathlib import Path

import numpy as np

RTOL, ATOL = 1e-3, 1e-4
KINDS = ("match", "mismatch", "unsupported", "refused", "crash")


@dataclass
class Outcome:
    """What onnxkit did with one model; ``max_abs_err`` is over every numeric output (None if it
    did not run); ``message`` is onnxkit's error text or the mismatch description."""

    kind: str
    detail: str = ""
    message: str = ""
    max_abs_err: float | None = None

    def label(self) -> str:
        """``match`` or ``<kind>: <detail>`` (the form expected.toml uses)."""
        return self.kind if self.kind == "match" else f"{self.kind}: {self.detail}"


def parse_expected(text: str) -> tuple[str, str]:
    """Split an expected outcome ``"<kind>: <text>"`` (or ``"match"``) into kind and text."""
    kind, _, rest = text.partition(":")
    kind = kind.strip()
    if kind not in KINDS:
        raise ValueError(f"unknown outcome kind {kind!r} in {text!r}; one of {KINDS}")
    return kind, rest.strip()


def agrees(outcome: Outcome, expected: str) -> bool:
    """Whether ``outcome`` is the ``expected`` one (see the module docstring)."""
    kind, text = parse_expected(expected)
    if outcome.kind != kind:
        return False
    if kind == "unsupported":
        return outcome.detail == text
    return text in outcome.detail or text in outcome.message


def _numeric_err(got: np.ndarray, ref: np.ndarray) -> tuple[float, bool]:
    """(max abs error, within tolerance) of two numeric arrays of one shape."""
    if got.size == 0:
        return 0.0, True
    g, r = got.astype(np.float64), ref.astype(np.float64)
    same_special = (np.isnan(g) & np.isnan(r)) | (np.isinf(g) & (g == r))
    with np.errstate(invalid="ignore"):  # inf - inf: handled by same_special
        diff = np.where(same_special, 0.0, np.abs(g - r))
    ok = bool(np.all(same_special | (diff <= ATOL + RTOL * np.abs(r))))
    diff = diff[np.isfinite(diff)]
    return (float(diff.max()) if diff.size else (0.0 if ok else math.inf)), ok


def compare(got, ref, where: str = "output") -> tuple[float, str]:
    """Max abs error of ``got`` against onnxruntime's ``ref``, and "" or why they differ.

    Arrays must agree in dtype, shape and values; strings in Python type and value (onnxruntime
    returns ``str``); sequences element by element; maps (ZipMap) in keys and, numerically, values
    (onnxkit returns a map's float values as 0-d float64 arrays, onnxruntime as Python ``float``:
    the value is compared, not its Python type).
    """
    if isinstance(ref, list):
        if not isinstance(got, (list, tuple)) or len(got) != len(ref):
            return 0.0, f"{where}: expected a sequence of {len(ref)}, got {type(got).__name__}"
        worst = 0.0
        for i, (g, r) in enumerate(zip(got, ref)):
            err, why = compare(g, r, f"{where}[{i}]")
            if why:
                return err, why
            worst = max(worst, err)
        return worst, ""
    if isinstance(ref, dict):
        if not isinstance(got, dict) or [type(k) for k in got] != [type(k) for k in ref] or set(got) != set(ref):
            return 0.0, f"{where}: map keys {list(got)[:4]} differ from onnxruntime's {list(ref)[:4]}"
        keys = list(ref)
        return compare(np.array([np.asarray(got[k]).item() for k in keys], np.float64),
                       np.array([ref[k] for k in keys], np.float64), where)
    got, ref = np.asarray(got), np.asarray(ref)
    if got.shape != ref.shape:
        return 0.0, f"{where}: shape {list(got.shape)}, onnxruntime {list(ref.shape)}"
    if ref.dtype == object:
        bad = [(g, r) for g, r in zip(got.ravel(), ref.ravel()) if type(g) is not type(r) or g != r]
        return 0.0, (f"{where}: string element {bad[0][0]!r} where onnxruntime gives {bad[0][1]!r}" if bad else "")
    if got.dtype != ref.dtype:
        return 0.0, f"{where}: dtype {got.dtype}, onnxruntime {ref.dtype}"
    if ref.dtype.kind in "biu":
        n = int(np.count_nonzero(got != ref))
        return 0.0, (f"{where}: {n} of {ref.size} integer elements differ" if n else "")
    err, ok = _numeric_err(got, ref)
    return err, ("" if ok else f"{where}: max abs error {err:.3g} exceeds atol {ATOL} + rtol {RTOL}")


def _onnxruntime(path: Path, inputs: dict) -> list:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, inputs)


def run_model(path: Path, inputs: dict) -> Outcome:
    """Run the model on onnxkit (defaults) and onnxruntime; the outcome (module docstring)."""
    import onnxkit
    from onnxkit.errors import OnnxkitError, UnsupportedOperatorError

    ref = _onnxruntime(path, inputs)
    stage = "session creation"
    try:
        sess = onnxkit.InferenceSession(str(path))
        stage = "run"
        got = sess.run(None, inputs)
    except UnsupportedOperatorError as e:
        if stage != "session creation":  # the contract is: reported when the session is created
            return Outcome("refused", "at run: UnsupportedOperatorError", str(e))
        ops = sorted({f"{d or 'ai.onnx'}::{op}" for d, op, _v, _why in e.operators})
        return Outcome("unsupported", ", ".join(ops), str(e))
    except OnnxkitError as e:
        codes = sorted({d.code for d in getattr(e, "diagnostics", ())})
        detail = f"at {stage}: {type(e).__name__}" + (f" [{', '.join(codes)}]" if codes else "")
        return Outcome("refused", detail, f"{type(e).__name__}: {e}")
    except Exception as e:  # noqa: BLE001 - anything else is an onnxkit bug, reported as such
        tb = traceback.extract_tb(e.__traceback__)[-1]
        return Outcome("crash", f"at {stage}: {type(e).__name__}",
                       f"{type(e).__name__}: {e} ({Path(tb.filename).name}:{tb.lineno})")
    if len(got) != len(ref):
        return Outcome("mismatch", "output count", f"{len(got)} outputs, onnxruntime {len(ref)}")
    worst, problems = 0.0, []
    for i, (g, r) in enumerate(zip(got, ref)):
        err, why = compare(g, r, f"output {i}")
        worst = max(worst, err)
        if why:
            problems.append(why)
    if problems:
        return Outcome("mismatch", problems[0].split(": ", 1)[-1][:60], "; ".join(problems), worst)
    return Outcome("match", max_abs_err=worst)


def run_corpus(out: Path, manifest: dict) -> dict[str, Outcome]:
    """The outcome of every model of the manifest, by name."""
    from corpus_cache import load_inputs

    return {m["name"]: run_model(out / m["file"], load_inputs(out, m["name"])) for m in manifest["models"]}


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} kB"


def results_table(manifest: dict, results: dict[str, Outcome], messages: bool = False) -> str:
    """The Markdown table of the corpus: model, producer, size, result, max abs error (and, with
    ``messages``, onnxkit's message, first 200 characters)."""
    head = "| model | producer | size | result | max abs error vs onnxruntime |"
    rule = "|---|---|---|---|---|"
    if messages:
        head, rule = head + " onnxkit's message (first 200 characters) |", rule + "---|"
    rows = [head, rule]
    for m in manifest["models"]:
        o = results[m["name"]]
        err = "—" if o.max_abs_err is None else f"{o.max_abs_err:.1e}"
        row = (f"| {m['name']} | {m['producer']} {m['producer_version']} | {_size(m['size'])} | "
               f"{o.label()} | {err} |")
        if messages:
            text = " ".join(o.message.split())[:200].replace("|", "\\|")
            row += f" {text} |"
        rows.append(row)
    return "\n".join(rows) + "\n"


def counts(labels) -> dict[str, int]:
    """How many of ``labels`` (outcome labels or expected strings) are of each kind."""
    out = dict.fromkeys(KINDS, 0)
    for label in labels:
        out[parse_expected(label)[0]] += 1
    return out


def write_results(path: Path, manifest: dict, results: dict[str, Outcome]) -> None:
    """Write RESULTS.md: the counts, then the table with messages."""
    c = counts(o.label() for o in results.values())
    summary = ", ".join(f"{n} {k}" for k, n in c.items())
    path.write_text("# Real-world corpus: today's results\n\n"
                    "Generated by `python tests/corpus/build.py --results` (onnxkit's defaults vs onnxruntime, "
                    f"CPU; rtol {RTOL}, atol {ATOL}).\n\n{len(results)} models: {summary}.\n\n"
                    + results_table(manifest, results, messages=True))
