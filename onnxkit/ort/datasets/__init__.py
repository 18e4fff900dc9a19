"""``onnxruntime.datasets``: small example models by name, as onnxruntime's tests ask for them.

:func:`get_example` returns the path of a model onnxkit writes (with its own writer, on first
use, into a cache folder: ``$ONNXKIT_DATASETS`` or a per-user temporary one).  The models
are onnxkit's own (written here, not copied files), of the same names, signatures and functions
as onnxruntime's examples:

* ``sigmoid.onnx``: ``y = Sigmoid(x)``, x float [3, 4, 5];
* ``mul_1.onnx``: ``Y = X * W``, X float [3, 2], W the initializer [[1, 2], [3, 4], [5, 6]];
* ``logreg_iris.onnx``: a LinearClassifier on float [N, 2] with onnxruntime's example's
  coefficients (one-vs-rest logistic scores, L1-normalized by a Normalizer): labels int64 [N],
  and the class probabilities as a sequence of maps {int64: float} through ZipMap.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np

from ... import ir
from ...errors import NoSuchFileError

_F, _I64 = 1, 7


def _vi(name, elem, shape):
    return ir.ValueInfo(name, ir.tensor_type(elem, shape))


def _model(nodes, inputs, outputs, initializers=(), opsets=(("", 13),)) -> ir.Model:
    g = ir.Graph(node=list(nodes), name="example", input=list(inputs), output=list(outputs),
                 initializer=list(initializers))
    return ir.Model(ir_version=8, producer_name="onnxkit.ort.datasets", graph=g,
                    opset_import=[ir.OperatorSetId(d, v) for d, v in opsets])


def _sigmoid() -> ir.Model:
    return _model([ir.Node(["x"], ["y"], op_type="Sigmoid", name="sigmoid")],
                  [_vi("x", _F, [3, 4, 5])], [_vi("y", _F, [3, 4, 5])])


def _mul_1() -> ir.Model:
    from ...ir.tensor import numpy_to_tensor

    w = numpy_to_tensor(np.array([[1, 2], [3, 4], [5, 6]], np.float32), "W")
    return _model([ir.Node(["X", "W"], ["Y"], op_type="Mul", name="mul")],
                  [_vi("X", _F, [3, 2])], [_vi("Y", _F, [3, 2])], [w])


def _logreg_iris() -> ir.Model:
    A = ir.Attribute.make
    # The function of onnxruntime's example of this name: one-vs-rest logistic scores of 3 classes
    # over 2 features (these 3 x 2 coefficients and 3 intercepts), L1-normalized.
    coefficients = [0.38574114441871643, 1.3805406093597412, -2.1314499378204346, -0.9928048253059387,
                    0.6427745223045349, -1.748938798904419]
    intercepts = [0.2496291995048523, 0.582027792930603, -0.9416166543960571]
    nodes = [
        ir.Node(["float_input"], ["label", "probability_tensor"], op_type="LinearClassifier", domain="ai.onnx.ml",
                name="linear", attribute=[A("classlabels_ints", [0, 1, 2]), A("coefficients", coefficients),
                                          A("intercepts", intercepts), A("multi_class", 0),
                                          A("post_transform", "LOGISTIC")]),
        ir.Node(["probability_tensor"], ["normalized"], op_type="Normalizer", domain="ai.onnx.ml", name="normalize",
                attribute=[A("norm", "L1")]),
        ir.Node(["normalized"], ["probabilities"], op_type="ZipMap", domain="ai.onnx.ml", name="zipmap",
                attribute=[A("classlabels_int64s", [0, 1, 2])]),
    ]
    seq = ir.SequenceType(ir.MapType(_I64, ir.tensor_type(_F)))
    return _model(nodes, [_vi("float_input", _F, ["N", 2])],
                  [_vi("label", _I64, ["N"]), ir.ValueInfo("probabilities", seq)],
                  opsets=(("", 13), ("ai.onnx.ml", 1)))


EXAMPLES = {"sigmoid.onnx": _sigmoid, "mul_1.onnx": _mul_1, "logreg_iris.onnx": _logreg_iris}


def _folder() -> str:
    d = os.environ.get("ONNXKIT_DATASETS") or os.path.join(tempfile.gettempdir(), f"onnxkit-datasets-{os.getuid()}"
                                                           if hasattr(os, "getuid") else "onnxkit-datasets")
    os.makedirs(d, exist_ok=True)
    return d


def get_example(name: str) -> str:
    """The path of example model ``name`` (see the module docstring), written on first use and
    again wherever the cached file's octets are not this onnxkit's model's."""
    make = EXAMPLES.get(name)
    if make is None:
        raise NoSuchFileError(f"onnxkit has no example model {name!r}; examples: {sorted(EXAMPLES)}")
    path = os.path.join(_folder(), name)
    from ...api import to_bytes

    octets = to_bytes(make())
    try:
        with open(path, "rb") as fh:
            if fh.read() == octets:
                return path
    except OSError:
        pass
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as fh:   # written again where a cached file differs (an older onnxkit's)
        fh.write(octets)
    os.replace(tmp, path)
    return path
