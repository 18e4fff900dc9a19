"""onnxruntime.transformers.io_binding_helper's session wrappers on onnxkit
(onnxkit/ort/transformers/io_binding_helper.py), against onnxruntime 1.32's own helper module
running the same model with torch CPU tensors."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")
from onnx import TensorProto as TP, helper  # noqa: E402
from onnxruntime.transformers import io_binding_helper as theirs  # noqa: E402

from onnxkit import InferenceSession, OnnxkitError  # noqa: E402
from onnxkit.ort.transformers import io_binding_helper as mine  # noqa: E402


def _decoder_step() -> bytes:
    """y = x @ W + past.sum(axis=1) and present = past * 2 + 1 (the shape of past): a state in,
    a state of the same shape out, as a decoder's key/value cache."""
    w = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["xw"]),
         helper.make_node("ReduceSum", ["past", "axes"], ["ps"], keepdims=1),
         helper.make_node("Add", ["xw", "ps"], ["y"]),
         helper.make_node("Mul", ["past", "two"], ["p2"]),
         helper.make_node("Add", ["p2", "one"], ["present"])], "step",
        [helper.make_tensor_value_info("x", TP.FLOAT, ["b", 3]),
         helper.make_tensor_value_info("past", TP.FLOAT, ["b", 4])],
        [helper.make_tensor_value_info("y", TP.FLOAT, ["b", 4]),
         helper.make_tensor_value_info("present", TP.FLOAT, ["b", 4])],
        [helper.make_tensor("W", TP.FLOAT, [3, 4], w.ravel()), helper.make_tensor("axes", TP.INT64, [1], [1]),
         helper.make_tensor("two", TP.FLOAT, [], [2.0]), helper.make_tensor("one", TP.FLOAT, [], [1.0])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _steps(module, session, share: bool, graph: bool):
    """Three steps of the decoder through ``module``'s wrappers: the outputs after each."""
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    past = torch.ones(2, 4)
    shapes = {"x": [2, 3], "past": [2, 4], "y": [2, 4], "present": [2, 4]}
    manager = module.GpuBindingManager(session, torch.device("cpu"), max_cuda_graphs=1)
    binding = manager.get_binding(shapes, use_cuda_graph=graph, buffer_sharing={"past": "present"} if share else None)
    outs = []
    for step in range(3):
        feeds = {"x": x + step, "past": past}
        got = binding.infer(feeds)
        outs.append({k: v.clone() for k, v in got.items()})
        if not share:
            past = got["present"].clone()
    return outs


@pytest.mark.parametrize("share, graph", [(False, False), (True, False), (False, True)])
def test_gpu_binding_runs_as_onnxruntime_s(share, graph):
    model = _decoder_step()
    kit = _steps(mine, InferenceSession(model), share, graph)
    # onnxruntime's graph mode takes CUDA tensors only: its run without a graph is the reference
    ref = _steps(theirs, ort.InferenceSession(model, providers=["CPUExecutionProvider"]), share, False)
    for a, b in zip(kit, ref):
        assert sorted(a) == sorted(b)
        for k in a:
            torch.testing.assert_close(a[k], b[k], rtol=0, atol=1e-6)


def test_cuda_session_outputs_are_its_own_tensors_and_types_are_onnxruntime_s():
    model = _decoder_step()
    kit, ref = InferenceSession(model), ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    assert mine.TypeHelper.get_io_onnx_type_map(kit) == theirs.TypeHelper.get_io_onnx_type_map(ref)
    assert mine.TypeHelper.get_io_torch_type_map(kit) == theirs.TypeHelper.get_io_torch_type_map(ref)
    s = mine.CudaSession(kit, torch.device("cpu"))
    s.allocate_buffers({"y": [2, 4], "present": [2, 4]})
    y = s.output_tensors["y"]
    got = s.infer({"x": torch.ones(2, 3), "past": torch.zeros(2, 4)})
    assert got["y"] is y   # written in place, as onnxruntime's wrapper does
    np.testing.assert_allclose(y.numpy(), ref.run(["y"], {"x": np.ones((2, 3), np.float32),
                                                        "past": np.zeros((2, 4), np.float32)})[0], atol=1e-6)
    assert mine.CudaSession.get_cuda_provider_options(1, True, 7) == \
        theirs.CudaSession.get_cuda_provider_options(1, True, 7)
    with pytest.raises(OnnxkitError, match="must be a contiguous torch tensor"):
        s.infer({"x": torch.ones(3, 2).t(), "past": torch.zeros(2, 4)})
    with pytest.raises(OnnxkitError, match="set_buffer_sharing: 'y' must be an input"):
        s.set_buffer_sharing("y", "present")


def test_io_binding_helper_buffers_as_onnxruntime_s():
    model = _decoder_step()
    outs = []
    for module, session in ((mine, InferenceSession(model)),
                            (theirs, ort.InferenceSession(model, providers=["CPUExecutionProvider"]))):
        shapes = {"y": [2, 4], "present": [2, 4]}
        buffers = module.IOBindingHelper.get_output_buffers(session, shapes, torch.device("cpu"))
        io = session.io_binding()
        for name, t in (("x", torch.ones(2, 3)), ("past", torch.full((2, 4), 0.5))):
            io.bind_input(name, "cpu", 0, module.TypeHelper.get_io_onnx_type_map(session)[name], list(t.shape),
                          t.data_ptr())
            outs.append(t)   # kept alive while the binding reads it
        for name, b in buffers.items():
            io.bind_output(name, "cpu", 0, TP.FLOAT, shapes[name], b.data_ptr())
        session.run_with_iobinding(io)
        outs.append(module.IOBindingHelper.get_outputs_from_io_binding_buffer(session, buffers, shapes))
    for a, b in zip(outs[2], outs[5]):
        np.testing.assert_allclose(a, b, atol=1e-6)
