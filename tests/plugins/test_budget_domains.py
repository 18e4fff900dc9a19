"""Limits for nodes of every domain (issue 29 item 10): ai.onnx.ml, ImageDecoder, a plugin's own ops.

Before: ``guard_for`` returned None outside ai.onnx and ImageDecoder had no guard, so under
``max_value_bytes`` = 64 MiB a 1 GiB FeatureVectorizer output, a 2^25-bin custom-domain output and
a 432 MB decoded PNG went through, as did 2^20 ZipMap maps under ``max_sequence_length`` = 1000.
Now every ai.onnx.ml operator is refused *before* its kernel runs (its inference function's sizes,
or the sizes its kernel declares), ImageDecoder from the image header, and a plugin's operator
either by what it declares / infers or, failing both, right after its kernel returned.
Each case runs a real session (inputs of at most a few MiB); together they take about a second.
"""

from __future__ import annotations

import struct
import types
import zlib

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402

import onnxkit  # noqa: E402
from onnxkit import hookimpl, ir  # noqa: E402
from onnxkit.errors import LimitExceeded  # noqa: E402
from onnxkit.limits import MiB, Limits  # noqa: E402
from onnxkit.plugin import FormalParameter, KernelTable, OperatorSet, OpSchema, TypeConstraint, \
    declares_output_bytes  # noqa: E402
from onnxkit.registry import build_registry  # noqa: E402

#: the one-node models leave output shapes (and, here, types) to inference
pytestmark = pytest.mark.filterwarnings("ignore::onnxkit.errors.ConformanceWarning")
ML = "ai.onnx.ml"
LIMITS = Limits(max_value_bytes=MiB, max_run_bytes=64 * MiB, max_sequence_length=1000)
BEFORE = "checked after"  # in the message only when the after-the-kernel check refused
MAP = h.make_map_type_proto(T.INT64, h.make_tensor_type_proto(T.FLOAT, []))


def ml_case(op, feeds: dict, outputs=((T.FLOAT, None),), ml=3, **attributes):
    """(model bytes, feeds) of one ai.onnx.ml node over graph inputs typed like ``feeds``."""
    def info(name, v):
        if isinstance(v, dict):
            return h.make_value_info(name, MAP)
        return h.make_tensor_value_info(name, {np.float32: T.FLOAT, np.int64: T.INT64}[v.dtype.type], list(v.shape))

    outs = [f"y{k}" for k in range(len(outputs))]
    node = h.make_node(op, list(feeds), outs, domain=ML, name=f"hostile_{op}", **attributes)
    out_infos = [h.make_tensor_sequence_value_info(o, T.FLOAT, None) if e == "seq"
                 else h.make_value_info(o, h.make_sequence_type_proto(h.make_map_type_proto(T.INT64,
                                                                     h.make_tensor_type_proto(T.FLOAT, []))))
                 if e == "seqmap" else h.make_tensor_value_info(o, e, s) for o, (e, s) in zip(outs, outputs)]
    graph = h.make_graph([node], "g", [info(n, v) for n, v in feeds.items()], out_infos)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 21), h.make_opsetid(ML, ml)], ir_version=10)
    return model.SerializeToString(), feeds


def _stump_attrs(prefix, n):
    """One tree, a single leaf voting 1.0 for each of ``n`` targets / classes."""
    return dict(nodes_treeids=[0], nodes_nodeids=[0], nodes_featureids=[0], nodes_modes=["LEAF"], nodes_values=[0.0],
                nodes_truenodeids=[0], nodes_falsenodeids=[0], **{f"{prefix}_treeids": [0] * n,
                                                                    f"{prefix}_nodeids": [0] * n,
                                                                    f"{prefix}_ids": list(range(n)),
                                                                    f"{prefix}_weights": [1.0] * n})


def _tree_ensemble_5():
    return ml_case("TreeEnsemble", {"X": np.zeros((1 << 17, 1), np.float32)}, ml=5, n_targets=8,
                   nodes_featureids=[0], nodes_splits=h.make_tensor("s", T.FLOAT, [1], [0.0]),
                   nodes_modes=h.make_tensor("m", T.UINT8, [1], [0]), nodes_truenodeids=[0], nodes_trueleafs=[1],
                   nodes_falsenodeids=[0], nodes_falseleafs=[1], tree_roots=[0], leaf_targetids=list(range(8)),
                   leaf_weights=h.make_tensor("w", T.FLOAT, [8], [1.0] * 8))


X17 = {"X": np.zeros((1 << 17, 1), np.float32)}
ML_CASES = {
    "FeatureVectorizer": lambda: ml_case("FeatureVectorizer", {"X": np.zeros((1, 1), np.float32)},
                                         inputdimensions=[1 << 28]),  # 1 GiB
    "ZipMap": lambda: ml_case("ZipMap", {"X": np.zeros((2048, 2), np.float32)}, outputs=(("seqmap", None),),
                              classlabels_int64s=[0, 1]),
    "ArrayFeatureExtractor": lambda: ml_case("ArrayFeatureExtractor", {"X": np.zeros((2048, 4), np.float32),
                                                                       "Y": np.zeros(1024, np.int64)}),
    "Binarizer": lambda: ml_case("Binarizer", {"X": np.zeros(1 << 19, np.float32)}),
    "CastMap": lambda: ml_case("CastMap", {"X": {0: np.float32(1)}}, map_form="SPARSE", max_map=1 << 20),
    "CategoryMapper": lambda: ml_case("CategoryMapper", {"X": np.zeros(1 << 18, np.int64)}, outputs=((T.STRING, None),),
                                      cats_int64s=[1], cats_strings=["a"]),
    "DictVectorizer": lambda: ml_case("DictVectorizer", {"X": {0: np.float32(1)}}, int64_vocabulary=list(range(1 << 18))),
    "Imputer": lambda: ml_case("Imputer", {"X": np.zeros((1 << 18, 2), np.float32)}, imputed_value_floats=[0.0],
                               replaced_value_float=1.0),
    "LabelEncoder": lambda: ml_case("LabelEncoder", {"X": np.zeros(1 << 18, np.int64)}, outputs=((T.STRING, None),),
                                    ml=2, keys_int64s=[1], values_strings=["a"]),
    "LinearClassifier": lambda: ml_case("LinearClassifier", X17, outputs=((T.INT64, None), (T.FLOAT, None)),
                                        coefficients=[1.0] * 8, classlabels_ints=list(range(8))),
    "LinearRegressor": lambda: ml_case("LinearRegressor", X17, coefficients=[1.0] * 8, targets=8),
    "Normalizer": lambda: ml_case("Normalizer", {"X": np.zeros((1 << 18, 2), np.float32)}, norm="MAX"),
    "OneHotEncoder": lambda: ml_case("OneHotEncoder", {"X": np.zeros((2048, 1), np.int64)},
                                     cats_int64s=list(range(1024))),
    "SVMClassifier": lambda: ml_case("SVMClassifier", X17, outputs=((T.INT64, None), (T.FLOAT, None)),
                                     kernel_type="LINEAR", vectors_per_class=[1, 1], support_vectors=[0.0, 1.0],
                                     coefficients=[1.0, -1.0], rho=[0.0], classlabels_ints=[0, 1]),
    "SVMRegressor": lambda: ml_case("SVMRegressor", {"X": np.zeros(((1 << 18) + 1, 1), np.float32)},
                                    kernel_type="LINEAR", support_vectors=[0.0], coefficients=[1.0], n_supports=1,
                                    rho=[0.0]),
    "Scaler": lambda: ml_case("Scaler", {"X": np.zeros((1 << 18, 2), np.float32)}, offset=[0.0], scale=[1.0]),
    "TreeEnsemble": _tree_ensemble_5,
    "TreeEnsembleClassifier": lambda: ml_case("TreeEnsembleClassifier", X17, outputs=((T.INT64, None), (T.FLOAT, None)),
                                              classlabels_int64s=list(range(8)), **_stump_attrs("class", 8)),
    "TreeEnsembleRegressor": lambda: ml_case("TreeEnsembleRegressor", X17, n_targets=8, **_stump_attrs("target", 8)),
}


def test_every_ml_operator_has_a_hostile_case():
    from onnxkit_ml.kernels import all_kernels

    ops = {op for _, op, _ in all_kernels()}
    assert len(ops) == 19  # an ai.onnx.ml kernel added needs a case here (and this count)
    assert set(ML_CASES) == ops


@pytest.mark.parametrize("op", sorted(ML_CASES))
def test_ml_operator_is_refused_before_its_kernel_runs(op):
    model, feeds = ML_CASES[op]()
    sess = onnxkit.InferenceSession(model, limits=LIMITS)
    with pytest.raises(LimitExceeded) as info:
        sess.run(None, feeds)
    e = info.value
    assert e.limit == ("max_sequence_length" if op == "ZipMap" else "max_value_bytes"), e
    assert f"'hostile_{op}' (ai.onnx.ml::{op})" in str(e) and BEFORE not in str(e), e
    assert e.value > e.maximum


def test_zipmap_within_the_limit_runs():
    model, feeds = ml_case("ZipMap", {"X": np.ones((1000, 2), np.float32)}, outputs=(("seqmap", None),),
                           classlabels_int64s=[0, 1])
    (maps,) = onnxkit.InferenceSession(model, limits=LIMITS).run(None, feeds)
    assert len(maps) == 1000 and maps[0] == {0: 1.0, 1: 1.0}


# -- ImageDecoder --------------------------------------------------------------------------------

def _png_header(width: int, height: int) -> bytes:
    """A PNG whose IHDR says width x height RGB (8 bit) and whose pixel data is empty."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) + \
        chunk(b"IDAT", zlib.compress(b""))


def _image_decoder():
    node = h.make_node("ImageDecoder", ["x"], ["y"], name="decode", pixel_format="RGB")
    graph = h.make_graph([node], "g", [h.make_tensor_value_info("x", T.UINT8, [None])],
                         [h.make_tensor_value_info("y", T.UINT8, [None, None, 3])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 20)], ir_version=10).SerializeToString()


def test_image_decoder_refuses_a_large_image_from_its_header():
    sess = onnxkit.InferenceSession(_image_decoder(), limits=Limits(max_value_bytes=64 * MiB))
    data = np.frombuffer(_png_header(12000, 12000), np.uint8)  # 432 MB decoded, 33 octets encoded
    with pytest.raises(LimitExceeded) as info:
        sess.run(None, {"x": data})
    assert info.value.limit == "max_value_bytes" and info.value.value == 12000 * 12000 * 3
    assert "'decode' (ImageDecoder)" in str(info.value) and BEFORE not in str(info.value)


def test_image_decoder_decodes_an_image_within_the_limit():
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (64, 32), (10, 20, 30)).save(buf, format="PNG")
    sess = onnxkit.InferenceSession(_image_decoder(), limits=Limits(max_value_bytes=64 * 32 * 3))
    (y,) = sess.run(None, {"x": np.frombuffer(buf.getvalue(), np.uint8)})  # exactly the limit
    assert y.shape == (32, 64, 3) and y[0, 0].tolist() == [10, 20, 30]


# -- a plugin's own operators ----------------------------------------------------------------------

CUSTOM = "com.hostile"
CALLED = []


class _Plugin:
    """Histogram (no inference function, no declared size: checked after its kernel), Sized (declares
    its size), Inferred (an inference function), Repeat (a sequence of ``count`` tensors)."""

    P = FormalParameter
    KERNELS = KernelTable()

    @staticmethod
    def schema(name, out="tensor(float)"):
        return OpSchema(domain=CUSTOM, name=name, since_version=1, inputs=(FormalParameter("x", "T"),),
                        outputs=(FormalParameter("y", out),),
                        type_constraints=(TypeConstraint("T", ("tensor(float)",)),),
                        attributes={"bins": onnxkit.schema.AttributeDef("bins", ir.AttributeType.INT)})

    @staticmethod
    @hookimpl
    def onnxkit_operator_sets():
        s = _Plugin.schema
        return [OperatorSet(CUSTOM, 1, {"Histogram": s("Histogram"), "Sized": s("Sized"), "Inferred": s("Inferred"),
                                        "Repeat": s("Repeat", "seq(tensor(float))")})]

    @staticmethod
    @hookimpl
    def onnxkit_portable_kernels():
        return _Plugin.KERNELS

    @staticmethod
    @hookimpl
    def onnxkit_inference_functions():
        def infer(ctx):
            return [ir.tensor_type(1, [int(ctx.attr("bins"))])]
        return {(CUSTOM, "Inferred", 1): infer}


def _bins_kernel(declare):
    def factory(ctx):
        bins = int(ctx.attr("bins"))

        def run(x):
            CALLED.append(ctx.op_type)
            return np.zeros(bins, np.float32)

        return declares_output_bytes(run, lambda x: 4 * bins) if declare else run
    return factory


_Plugin.KERNELS.register("Histogram", 1, domain=CUSTOM)(_bins_kernel(False))
_Plugin.KERNELS.register("Sized", 1, domain=CUSTOM)(_bins_kernel(True))
_Plugin.KERNELS.register("Inferred", 1, domain=CUSTOM)(_bins_kernel(False))


@_Plugin.KERNELS.register("Repeat", 1, domain=CUSTOM)
def _repeat(ctx):
    n = int(ctx.attr("bins"))
    return lambda x: [x] * n


@pytest.fixture(scope="module")
def registry():
    reg = build_registry(extra=[("hostile_plugin", types.SimpleNamespace(**{
        k: getattr(_Plugin, k) for k in ("onnxkit_operator_sets", "onnxkit_portable_kernels",
                                         "onnxkit_inference_functions")}))])
    assert not reg.faults, reg.faults
    return reg


def _custom(op, bins, registry):
    out = h.make_tensor_sequence_value_info("y", T.FLOAT, None) if op == "Repeat" else \
        h.make_tensor_value_info("y", T.FLOAT, [bins])
    node = h.make_node(op, ["x"], ["y"], domain=CUSTOM, name=f"custom_{op}", bins=bins)
    graph = h.make_graph([node], "g", [h.make_tensor_value_info("x", T.FLOAT, [1])], [out])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 21), h.make_opsetid(CUSTOM, 1)], ir_version=10)
    return onnxkit.InferenceSession(model.SerializeToString(), registry=registry, limits=LIMITS)


X = {"x": np.ones(1, np.float32)}


def test_an_unknown_operators_output_is_checked_after_its_kernel(registry):
    # 2^20 float bins (4 MiB) under 1 MiB: nothing predicts it, so it is refused once computed
    CALLED.clear()
    with pytest.raises(LimitExceeded) as info:
        _custom("Histogram", 1 << 20, registry).run(None, X)
    assert info.value.limit == "max_value_bytes" and info.value.value == 4 << 20
    assert BEFORE in str(info.value) and "'custom_Histogram' (com.hostile::Histogram)" in str(info.value)
    assert CALLED == ["Histogram"]
    (y,) = _custom("Histogram", 1 << 18, registry).run(None, X)  # exactly the limit
    assert y.nbytes == MiB


def test_an_unknown_operators_sequence_is_checked_after_its_kernel(registry):
    with pytest.raises(LimitExceeded) as info:
        _custom("Repeat", 1001, registry).run(None, X)
    assert info.value.limit == "max_sequence_length" and info.value.value == 1001
    assert len(_custom("Repeat", 1000, registry).run(None, X)[0]) == 1000


@pytest.mark.parametrize("op", ["Sized", "Inferred"])
def test_a_declared_or_inferred_size_is_refused_before_the_kernel(op, registry):
    CALLED.clear()
    with pytest.raises(LimitExceeded) as info:
        _custom(op, 1 << 20, registry).run(None, X)
    assert info.value.limit == "max_value_bytes" and BEFORE not in str(info.value)
    assert CALLED == []
    assert _custom(op, 1 << 18, registry).run(None, X)[0].nbytes == MiB
