"""Every case of issue #18 (and #12 item 4), each in a fresh interpreter under a 4 GiB
address-space cap and a wall-clock limit: an onnxkit error or the right result, quickly and
in bounded memory.  (Growth with input size is in test_growth.py.)
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import hostile
from hostile import run_capped

MiB = 1 << 20


def _ok(r: dict, seconds: float = 5.0, peak_mib: float = 1024.0) -> dict:
    assert r["seconds"] < seconds, r
    assert r["peak_mib"] < peak_mib, r
    return r


# -- decoder -----------------------------------------------------------------------------------

def test_nested_repeated_singular_messages_decode_at_once():
    # 12.3.2: every copy of a singular message is merged; a 1.5 KB input (once: hours) takes milliseconds
    r = _ok(run_capped("""
        import hostile
        from onnxkit.wire import decode_message
        data = hostile.nested_repeated_type(45, 8)
        result["octets"] = len(data)
        def go():
            t = decode_message(data, "TypeProto")
            depth = 0
            while t is not None and type(t).__name__ == "SequenceType":
                t, depth = t.elem_type, depth + 1
            return [depth, type(t).__name__]
        timed(go)
    """), seconds=2.0)
    assert r["outcome"] == "ok" and r["value"] == [45, "TensorType"], r


def test_repeated_graph_field_is_merged_linearly():
    r = _ok(run_capped("""
        import hostile
        data = hostile.repeated_graph(4000)   # 40 KB: ModelProto.graph 4,000 times
        timed(lambda: len(onnxkit.load(data).graph.node))
    """), seconds=3.0)
    assert r["outcome"] == "ok" and r["value"] == 4000, r


@pytest.mark.parametrize("builder, limit", [("empty_nodes", "max_nodes"), ("empty_initializers", "max_tensors")])
def test_empty_entries_are_refused_before_they_amplify(builder, limit):
    # 10 MB of 2-octet entries: refused at the count limit, not after building millions of objects
    r = _ok(run_capped(f"""
        import hostile
        from onnxkit.limits import Limits
        data = hostile.{builder}(5_000_000)
        timed(lambda: onnxkit.load(data, limits=Limits({limit}=20_000)))
    """), seconds=3.0, peak_mib=400)
    assert r["outcome"] == "error" and r["error"] == "LimitExceeded" and r["limit"] == limit, r
    assert limit in r["message"] and "graph" in r["message"], r


def test_default_limits_bound_counts():
    from onnxkit.limits import DEFAULT_LIMITS

    assert DEFAULT_LIMITS.max_nodes <= 1_000_000 and DEFAULT_LIMITS.max_tensors <= 1_000_000
    assert DEFAULT_LIMITS.max_messages <= 10_000_000


def test_message_count_limit():
    from onnxkit.errors import LimitExceeded
    from onnxkit.limits import Limits
    from onnxkit.wire import decode_message

    data = hostile.ld(7, hostile.ld(13, b"") * 100)  # 100 empty value_info entries
    with pytest.raises(LimitExceeded) as exc:
        decode_message(data, limits=Limits(max_messages=50))
    assert exc.value.limit == "max_messages" and "value_info" in exc.value.path


# -- checker locations and function depth ------------------------------------------------------------

def test_function_chain_locations_stay_small():
    # 29 levels once gave a first diagnostic of 536,872,406 characters and 3 GiB
    r = _ok(run_capped("""
        import hostile
        from onnxkit.inference import infer_model
        from onnxkit.checker import check_model
        model = hostile.function_chain(29, innermost="NoSuchOp")
        def go():
            report = check_model(model)
            diags = infer_model(model).diagnostics
            deepest = [str(d.location) for d in diags if d.code == "unknown-operator"]
            return [len(report.errors), max(map(len, deepest)), deepest[0].count("body of")]
        timed(go)
    """), seconds=5.0, peak_mib=300)
    assert r["outcome"] == "ok", r
    errors, longest, levels = r["value"]
    assert levels == 29 and longest < 29 * 120, r


def test_function_chain_of_200_is_refused_at_once():
    r = _ok(run_capped("""
        import hostile
        model = hostile.function_chain(200)
        small = hostile.function_chain(2)
        onnxkit.InferenceSession(small)            # registry and plugins loaded before timing
        result["base_mib"] = peak_mib()
        timed(lambda: onnxkit.InferenceSession(model))
    """), seconds=1.0)
    assert r["outcome"] == "error" and r["error"] == "LimitExceeded", r
    assert r["limit"] == "max_function_depth" and "max_function_depth" in r["message"], r
    assert r["peak_mib"] - r["base_mib"] < 100, r


def test_doubling_function_chain_is_refused_at_once():
    # each function calls the next twice: 30 levels (6 KB) expand 2**30 calls
    r = _ok(run_capped("""
        import hostile
        from onnxkit.checker import check_model
        from onnxkit.inference import infer_model
        model = hostile.function_chain(30, fan_out=2)
        onnxkit.InferenceSession(hostile.function_chain(2))
        result["base_mib"] = peak_mib()
        def go():
            result["checker"] = [d.message for d in check_model(model).errors]
            infer_model(model)
            onnxkit.InferenceSession(model)
        timed(go)
    """), seconds=2.0)
    assert r["outcome"] == "error" and r["error"] == "LimitExceeded" and r["limit"] == "max_function_calls", r
    assert any("max_function_calls" in m for m in r["checker"]), r
    assert r["peak_mib"] - r["base_mib"] < 100, r


def test_function_call_limit_in_the_planner():
    from onnxkit.errors import LimitExceeded
    from onnxkit.limits import Limits
    from onnxkit.runtime.session import InferenceSession

    model = hostile.function_chain(6, fan_out=2)  # 1 + 2 + 4 + ... + 32 = 63 calls
    x = {"X": np.array([-1, 2], np.float32)}
    assert InferenceSession(model).run(None, x)[0].tolist() == [0, 2]
    with pytest.raises(LimitExceeded) as exc:
        InferenceSession(model, validate=False, limits=Limits(max_function_calls=50))
    assert exc.value.limit == "max_function_calls"


def test_function_chain_of_200_refused_by_checker_and_planner():
    from onnxkit.checker import check_model
    from onnxkit.errors import LimitExceeded
    from onnxkit.runtime.session import InferenceSession

    model = hostile.function_chain(200)
    report = check_model(model)
    assert [d.code for d in report.errors] == ["limit-exceeded"] and "max_function_depth" in report.errors[0].message
    with pytest.raises(LimitExceeded) as exc:
        InferenceSession(model, validate=False)
    assert exc.value.limit == "max_function_depth"
    assert InferenceSession(hostile.function_chain(20)).run(None, {"X": np.array([-1, 2], np.float32)})[0].tolist() \
        == [0, 2]


# -- sessions own their data ---------------------------------------------------------------------------

def test_rewriting_or_truncating_the_model_under_a_session(tmp_path):
    r = _ok(run_capped(f"""
        import numpy as np, hostile
        from onnxkit.api import save
        path = {str(tmp_path / 'm.onnx')!r}
        save(hostile.scaled_model(2.0), path)
        x = np.ones(4, np.float32)
        def go():
            out = []
            for source in ("path", "model"):
                save(hostile.scaled_model(2.0), path)
                sess = onnxkit.InferenceSession(path if source == "path" else onnxkit.load(path))
                out.append(float(sess.run(None, {{"X": x}})[0][0]))
                with open(path, "r+b") as f:          # rewritten in place: 9.0 instead of 2.0
                    f.write(onnxkit.api.to_bytes(hostile.scaled_model(9.0)))
                out.append(float(sess.run(None, {{"X": x}})[0][0]))
                open(path, "wb").close()              # truncated, as exporters do: SIGBUS once
                out.append(float(sess.run(None, {{"X": x}})[0][0]))
            return out
        timed(go)
    """))
    assert r["outcome"] == "ok" and r["value"] == [2.0] * 6, r


def test_attribute_tensors_of_a_mapped_model_are_owned(tmp_path):
    # a model kept from load() is mapped; the session copies the tensors its kernels keep
    r = _ok(run_capped(f"""
        import numpy as np
        from onnxkit import ir
        from onnxkit.ir.attribute import AttributeType
        path = {str(tmp_path / 'm.onnx')!r}
        value = ir.Tensor(dims=[1], data_type=1, name="v", raw_data=np.float32(7).tobytes())
        node = ir.Node(input=["S"], output=["Y"], op_type="ConstantOfShape",
                       attribute=[ir.Attribute(name="value", type=AttributeType.TENSOR, value=value)])
        g = ir.Graph(node=[node], name="g", input=[ir.ValueInfo("S", ir.tensor_type(7, [1]))],
                     output=[ir.ValueInfo("Y", ir.tensor_type(1, ["n"]))])
        onnxkit.save(ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 17)], graph=g), path)
        sess = onnxkit.InferenceSession(onnxkit.load(path))
        open(path, "wb").close()
        timed(lambda: sess.run(None, {{"S": np.array([3], np.int64)}})[0].tolist())
    """))
    assert r["outcome"] == "ok" and r["value"] == [7.0] * 3, r


def test_truncating_external_data_under_a_session(tmp_path):
    r = _ok(run_capped(f"""
        import numpy as np, hostile
        from onnxkit.api import save
        path = {str(tmp_path / 'm.onnx')!r}
        save(hostile.scaled_model(2.0), path, external_data=True, size_threshold=0)
        sess = onnxkit.InferenceSession(path)
        x = np.ones(4, np.float32)
        def go():
            out = [float(sess.run(None, {{"X": x}})[0][0])]
            open(path + ".data", "wb").close()
            out.append(float(sess.run(None, {{"X": x}})[0][0]))
            return out
        timed(go)
    """))
    assert r["outcome"] == "ok" and r["value"] == [2.0, 2.0], r


def test_zero_copy_stays_available(tmp_path):
    from onnxkit.api import save
    from onnxkit.runtime.plan import _mapped
    from onnxkit.runtime.session import InferenceSession

    path = str(tmp_path / "m.onnx")
    save(hostile.scaled_model(3.0), path, external_data=True, size_threshold=0)
    mapped = InferenceSession(path, own_data=False).plan
    owned = InferenceSession(path).plan
    assert _mapped(next(iter(mapped.constants.values())))
    assert not _mapped(next(iter(owned.constants.values())))


def test_one_descriptor_per_external_file(tmp_path):
    # 3,000 tensors on one file, under a limit of 128 open files: one map, one descriptor
    r = _ok(run_capped(f"""
        import resource, numpy as np
        from onnxkit import ir
        from onnxkit.api import save
        resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))
        n = 3_000
        inits = [ir.Tensor(dims=[1], data_type=1, name=f"w{{i}}", raw_data=np.float32(i).tobytes()) for i in range(n)]
        g = ir.Graph(node=[], name="g", initializer=inits, output=[ir.ValueInfo("w7", ir.tensor_type(1, [1]))])
        path = {str(tmp_path / 'many.onnx')!r}
        save(ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 17)], graph=g), path, external_data=True,
             size_threshold=0)
        def go():
            m = onnxkit.load(path, external_data="eager")
            arrays = [t.numpy() for t in m.graph.initializer]   # every tensor a view, all alive
            return [len(os.listdir("/proc/self/fd")), float(arrays[-1][0])]
        import os
        timed(go)
    """), seconds=30.0)
    assert r["outcome"] == "ok" and r["value"][0] < 64 and r["value"][1] == 2_999.0, r


def test_many_tensors_mapping_one_region(tmp_path):
    # 200 tensors each naming the whole 64 MiB file: once 200 maps (12.5 GiB) and a bare OSError
    r = _ok(run_capped(f"""
        import numpy as np
        from onnxkit import ir
        from onnxkit.ir.tensor import StringStringEntry
        path = {str(tmp_path)!r}
        n = 16 * 1024 * 1024
        with open(path + "/data.bin", "wb") as f:
            f.truncate(4 * n)
        refs = lambda: [StringStringEntry("location", "data.bin"), StringStringEntry("offset", "0"),
                        StringStringEntry("length", str(4 * n))]
        inits = [ir.Tensor(dims=[n], data_type=1, name=f"w{{i}}", data_location=1, external_data=refs())
                 for i in range(200)]
        g = ir.Graph(node=[], name="g", initializer=inits, output=[ir.ValueInfo("w0", ir.tensor_type(1, [n]))])
        onnxkit.save(ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 17)], graph=g), path + "/m.onnx")
        def go():
            m = onnxkit.load(path + "/m.onnx")
            views = [t.numpy() for t in m.graph.initializer]
            return float(sum(v[-1] for v in views))
        timed(go)
    """))
    assert r["outcome"] == "ok" and r["value"] == 0.0, r


# -- regular files only -------------------------------------------------------------------------------

def test_non_regular_model_files_are_refused(tmp_path):
    # a FIFO once blocked load and check forever; /dev/zero loaded as an empty model
    fifo = str(tmp_path / "model.onnx")
    os.mkfifo(fifo)
    targets = [fifo, "/dev/zero", str(tmp_path)]
    r = _ok(run_capped(f"""
        import onnxkit.checker
        calls = [onnxkit.load, onnxkit.checker.check_model, onnxkit.InferenceSession]
        def go():
            out = []
            for target in {targets!r}:
                for call in calls:
                    try:
                        call(target)
                        out.append([target, call.__name__, "accepted"])
                    except OnnxkitError as exc:
                        out.append([target, call.__name__, str(exc)])
            with open("/dev/zero", "rb") as f:   # a device as a file object: refused, not read forever
                try:
                    onnxkit.load(f)
                    out.append(["/dev/zero", "load(file object)", "accepted"])
                except OnnxkitError as exc:
                    out.append(["/dev/zero", "load(file object)", str(exc)])
            return out
        timed(go)
    """, timeout=20), seconds=3.0)
    assert r["outcome"] == "ok" and len(r["value"]) == 10, r
    for target, call, message in r["value"]:
        assert "not a regular file" in message and target in message, (target, call, message)


def test_external_fifo_is_refused(tmp_path):
    from onnxkit.api import save
    from onnxkit.errors import OnnxkitError

    path = str(tmp_path / "m.onnx")
    save(hostile.scaled_model(2.0), path, external_data=True, size_threshold=0)
    os.remove(path + ".data")
    os.mkfifo(path + ".data")
    r = _ok(run_capped(f"""
        timed(lambda: onnxkit.load({path!r}, external_data="eager"))
    """, timeout=20), seconds=2.0)
    assert r["outcome"] == "error" and r["code"] == "not-regular", r
    assert issubclass(OnnxkitError, Exception)


# -- escapes become onnxkit errors --------------------------------------------------------------------

def _dims_model(dims):
    from onnxkit import ir

    t = ir.Tensor(dims=dims, data_type=1, name="W", raw_data=b"")
    g = ir.Graph(node=[ir.Node(input=["W"], output=["Y"], op_type="Identity")], name="g", initializer=[t],
                 output=[ir.ValueInfo("Y", ir.tensor_type(1, dims))])
    return ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 17)], graph=g)


def test_dims_whose_product_overflows():
    from onnxkit.checker import check_model
    from onnxkit.errors import OnnxkitError
    from onnxkit.runtime.session import InferenceSession

    model = _dims_model([2 ** 32, 2 ** 32, 0])
    report = check_model(model)
    assert any(d.code == "limit-exceeded" and "initializer 'W'" in d.location for d in report.errors), report.errors
    with pytest.raises(OnnxkitError) as exc:
        InferenceSession(model, validate=False)
    assert "tensor 'W'" in str(exc.value) and "overflows" in str(exc.value)
    assert check_model(_dims_model([3, 0])).ok


def test_ir_version_beyond_the_newest():
    from onnxkit.checker import check_model
    from onnxkit.errors import OnnxkitError
    from onnxkit.runtime.session import InferenceSession

    model = hostile.scaled_model(2.0)
    model.ir_version = 2 ** 62
    assert "ir-version-newer" in check_model(model).codes()
    with pytest.raises(OnnxkitError, match="ir_version 4611686018427387904 is newer"):
        InferenceSession(model)


def test_location_with_a_trailing_separator(tmp_path):
    from onnxkit.api import save
    from onnxkit.checker import check_model
    from onnxkit.storage import ExternalRefError

    path = str(tmp_path / "m.onnx")
    save(hostile.scaled_model(2.0), path, external_data=True, size_threshold=0, location="data.bin")
    model = onnxkit_load(path, external_data="never")
    w = model.graph.initializer[0]
    w.external_data[0].value = "data.bin/"
    save(model, path)
    with pytest.raises(ExternalRefError) as exc:
        onnxkit_load(path)
    assert exc.value.code == "invalid-location" and "data.bin/" in str(exc.value)
    assert "external-invalid-location" in check_model(path).codes()


def onnxkit_load(*args, **kwargs):
    from onnxkit.api import load

    return load(*args, **kwargs)


def test_allow_outside_is_honoured_by_the_session(tmp_path):
    from onnxkit.api import save
    from onnxkit.errors import OnnxkitError
    from onnxkit.runtime.session import InferenceSession

    sub = tmp_path / "sub"
    sub.mkdir()
    save(hostile.scaled_model(5.0), str(tmp_path / "m.onnx"), external_data=True, size_threshold=0,
         location="data.bin")
    model = onnxkit_load(str(tmp_path / "m.onnx"), external_data="never")
    model.graph.initializer[0].external_data[0].value = "../data.bin"
    save(model, str(sub / "m.onnx"))
    x = np.ones(4, np.float32)
    with pytest.raises(OnnxkitError):
        InferenceSession(str(sub / "m.onnx"))
    assert InferenceSession(str(sub / "m.onnx"), allow_outside=True).run(None, {"X": x})[0].tolist() == [5.0] * 4
    loaded = onnxkit_load(str(sub / "m.onnx"), allow_outside=True)
    assert InferenceSession(loaded).run(None, {"X": x})[0].tolist() == [5.0] * 4


# -- kernels validate their attributes ------------------------------------------------------------------

def _one_node(node, inputs, inits=()):
    from onnxkit import ir

    g = ir.Graph(node=[node], name="g", initializer=list(inits),
                 input=[ir.ValueInfo(n, ir.tensor_type(t, None)) for n, t in inputs],
                 output=[ir.ValueInfo("Y", ir.tensor_type(1, None))])
    return ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 19)], graph=g)


def _attribute(name, value):
    from onnxkit import ir
    from onnxkit.ir.attribute import AttributeType

    kind = {bytes: AttributeType.STRING, int: AttributeType.INT, float: AttributeType.FLOAT,
            list: AttributeType.INTS}[type(value)]
    return ir.Attribute(name=name, type=kind, value=value)


ATTRIBUTE_CASES = {
    # name: (op_type, attributes, the attribute the message names)
    "resize-mode": ("Resize", {"mode": b"bogus"}, "attribute mode"),
    "resize-nearest-mode": ("Resize", {"nearest_mode": b"bogus"}, "attribute nearest_mode"),
    "resize-coordinate-mode": ("Resize", {"coordinate_transformation_mode": b"bogus"},
                               "attribute coordinate_transformation_mode"),
    "lppool-p-zero": ("LpPool", {"kernel_shape": [2, 2], "p": 0}, "attribute p"),
    "lppool-p-negative": ("LpPool", {"kernel_shape": [2, 2], "p": -3}, "attribute p"),
    "roialign-mode": ("RoiAlign", {"mode": b"bogus"}, "attribute mode"),
    "roialign-output-height": ("RoiAlign", {"output_height": -1}, "attribute output_height"),
    "roialign-sampling-ratio": ("RoiAlign", {"sampling_ratio": -5}, "attribute sampling_ratio"),
}


def _attribute_model(op_type, attributes):
    from onnxkit import ir
    from onnxkit.ir.tensor import numpy_to_tensor

    attrs = [_attribute(k, v) for k, v in attributes.items()]
    if op_type == "Resize":
        node = ir.Node(input=["X", "", "S"], output=["Y"], op_type="Resize", attribute=attrs)
        scales = numpy_to_tensor(np.array([1, 1, 2, 2], np.float32), "S")
        return _one_node(node, [("X", 1)], [scales]), {"X": np.ones((1, 1, 2, 2), np.float32)}
    if op_type == "LpPool":
        node = ir.Node(input=["X"], output=["Y"], op_type="LpPool", attribute=attrs)
        return _one_node(node, [("X", 1)]), {"X": np.ones((1, 1, 4, 4), np.float32)}
    node = ir.Node(input=["X", "R", "B"], output=["Y"], op_type="RoiAlign", attribute=attrs)
    feed = {"X": np.ones((1, 1, 4, 4), np.float32), "R": np.array([[0, 0, 2, 2]], np.float32),
            "B": np.array([0], np.int64)}
    return _one_node(node, [("X", 1), ("R", 1), ("B", 7)]), feed


@pytest.mark.parametrize("case", sorted(ATTRIBUTE_CASES))
def test_kernels_name_the_bad_attribute(case):
    from onnxkit.errors import EvaluationError
    from onnxkit.runtime.session import InferenceSession

    op_type, attributes, named = ATTRIBUTE_CASES[case]
    model, feed = _attribute_model(op_type, attributes)
    with pytest.raises(EvaluationError) as exc:
        InferenceSession(model, validate=False).run(None, feed)
    assert named in str(exc.value) and exc.value.op_type == op_type


def test_roialign_batch_index_out_of_range():
    from onnxkit.errors import EvaluationError
    from onnxkit.runtime.session import InferenceSession

    model, feed = _attribute_model("RoiAlign", {})
    feed["B"] = np.array([-2 ** 63], np.int64)
    with pytest.raises(EvaluationError, match="batch index -9223372036854775808"):
        InferenceSession(model, validate=False).run(None, feed)
