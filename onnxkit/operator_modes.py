"""Modes of an operator that the host and a kernel must decide alike.

The optimizer rewrites a node only in the mode its kernel computes, so the rule deciding the
mode is written once, here, and read by both: the kernel (through :mod:`onnxkit.plugin`) and
the optimizer's passes.  This module imports nothing of onnxkit.

:func:`batch_norm_mode`: BatchNormalization's training / inference mode and ``spatial``, per
Part 2's history of the operator (versions 1, 6, 7, 9, 14, 15).
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Sequence


class BatchNormMode(NamedTuple):
    """``training``: the node normalises with the batch's statistics (and may update the running
    ones); else with the given mean and variance (inference, "test mode").  ``spatial``: the
    statistics are per channel (shape ``[C]``); False only before version 9, where
    ``spatial`` 0 keeps them per activation (shape ``X.shape[1:]``)."""

    training: bool
    spatial: bool


def batch_norm_mode(version: int, attributes: Mapping[str, Any], outputs: Sequence[str]) -> BatchNormMode:
    """The mode of a BatchNormalization of ai.onnx ``version`` (its definition's since_version,
    or the imported opset version: the two classify alike), with ``attributes`` its attribute
    values by name and ``outputs`` its output names.  Part 2 (the definitions' text):

    * versions 1 and 6: ``is_test`` decides ("if set to nonzero, run spatial batch
      normalization in test mode, default is 0"): 0 is training mode whichever outputs are named
      — the statistics outputs are optional, so training with Y alone still normalises with the
      batch's statistics (onnx's reference implementation does so);
    * versions 7 to 13 (no ``is_test``): the outputs decide, "Output case #1: Y, mean, var,
      saved_mean, saved_var (training mode); Output case #2: Y (test mode)" — training when an
      output after Y is named; an empty name is an output left out (Clause 7.3.3), not one named;
    * versions 14 and later: ``training_mode`` (default 0).

    ``spatial`` (default 1) is an attribute before 9 only.  An attribute absent from
    ``attributes`` takes Part 2's default, which is the same in every version having it:
    ``is_test`` 0, ``spatial`` 1, ``training_mode`` 0 (a kernel may pass its attributes with the
    schema's defaults filled in; the optimizer passes the node's own)."""
    spatial = bool(int(attributes.get("spatial", 1))) if version < 9 else True
    if version >= 14:
        training = bool(int(attributes.get("training_mode", 0)))
    elif version >= 7:
        training = any(bool(name) for name in outputs[1:])
    else:
        training = not int(attributes.get("is_test", 0))
    return BatchNormMode(training, spatial)
