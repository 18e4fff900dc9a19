"""``onnxruntime.transformers.io_binding_helper``: the type helpers HuggingFace optimum imports
(:class:`TypeHelper`), :class:`IOBindingHelper`, and the session wrappers onnxruntime's own
test helpers and benchmarks run models with (:class:`CudaSession`, :class:`GpuBinding`,
:class:`GpuBindingManager`), on onnxkit's sessions.

The wrappers bind torch tensors by address (``IOBinding.bind_input`` / ``bind_output`` with
``buffer_ptr``, :mod:`onnxkit.runtime.pointers`): CPU tensors on any backend, CUDA tensors where
torch sees CUDA.  Outputs are written into tensors the wrapper allocates (or into an input's
tensor where :meth:`CudaSession.set_buffer_sharing` pairs them).  onnxkit captures no CUDA
graphs: ``enable_cuda_graph`` keeps the inputs in fixed tensors that each run copies into (what a
captured graph needs; harmless without one), and the ``gpu_graph_id`` run entry is kept and
read by nothing.  torch is imported only where torch types or tensors are made."""

from __future__ import annotations

import numpy as np

from ...dtypes import ELEMENT_TYPES
from ...errors import OnnxkitError
from ...ir.types import TensorType, type_string

#: ``{name: shape}`` of inputs and outputs, as the wrappers take it
ShapeDict = dict

#: onnxruntime type strings (``tensor(float)``) -> ONNX element type tags.
_ORT_TAGS = {type_string(TensorType(int(tag))): int(tag) for tag in ELEMENT_TYPES}


def _arg(session, name: str, outputs: bool):
    for a in (session.get_outputs() if outputs else session.get_inputs()):
        if a.name == name:
            return a
    raise OnnxkitError(f"{'output' if outputs else 'input'} {name!r} not found in the session")


class TypeHelper:
    @staticmethod
    def get_input_type(ort_session, name: str) -> str:
        return _arg(ort_session, name, False).type

    @staticmethod
    def get_output_type(ort_session, name: str) -> str:
        return _arg(ort_session, name, True).type

    @staticmethod
    def ort_type_to_onnx_type(ort_type: str) -> int:
        tag = _ORT_TAGS.get(ort_type)
        if tag is None:
            raise OnnxkitError(f"{ort_type!r} is not a tensor type string onnxkit knows")
        return tag

    @staticmethod
    def ort_type_to_numpy_type(ort_type: str):
        et = ELEMENT_TYPES.get(TypeHelper.ort_type_to_onnx_type(ort_type))
        if et is None or et.dtype is None:
            raise OnnxkitError(f"{ort_type!r} has no numpy type")
        return np.dtype(et.dtype).type if et.tag != 8 else np.str_

    @staticmethod
    def numpy_type_to_torch_type(numpy_type):
        import torch

        if np.dtype(numpy_type) == np.bool_:
            return torch.bool
        return torch.from_numpy(np.zeros(0, dtype=numpy_type)).dtype

    @staticmethod
    def torch_type_to_numpy_type(torch_type):
        from ...runtime.torch_values import torch_to_numpy_dtype

        return torch_to_numpy_dtype(torch_type).type

    @staticmethod
    def ort_type_to_torch_type(ort_type: str):
        return TypeHelper.numpy_type_to_torch_type(TypeHelper.ort_type_to_numpy_type(ort_type))

    @staticmethod
    def get_io_onnx_type_map(ort_session) -> dict:
        return {a.name: TypeHelper.ort_type_to_onnx_type(a.type)
                for a in [*ort_session.get_inputs(), *ort_session.get_outputs()]}

    @staticmethod
    def get_io_numpy_type_map(ort_session) -> dict:
        return {a.name: TypeHelper.ort_type_to_numpy_type(a.type)
                for a in [*ort_session.get_inputs(), *ort_session.get_outputs()]}

    @staticmethod
    def get_io_torch_type_map(ort_session) -> dict:
        return {a.name: TypeHelper.ort_type_to_torch_type(a.type)
                for a in [*ort_session.get_inputs(), *ort_session.get_outputs()]}


class IOBindingHelper:
    @staticmethod
    def get_output_buffers(ort_session, output_shapes: dict, device) -> dict:
        """``{output name: flat torch tensor}`` on ``device`` with room for the output's shape."""
        import torch

        return {name: torch.empty(int(np.prod(shape)), dtype=TypeHelper.ort_type_to_torch_type(
            TypeHelper.get_output_type(ort_session, name)), device=device) for name, shape in output_shapes.items()}

    @staticmethod
    def prepare_io_binding(ort_session, input_ids, position_ids, attention_mask, past, output_buffers,
                           output_shapes):
        """An IOBinding of a decoder's inputs (``input_ids``, ``position_ids``, ``attention_mask``,
        ``past_0``... where given) and its outputs into ``output_buffers``, all by address."""
        types = TypeHelper.get_io_onnx_type_map(ort_session)
        io = ort_session.io_binding()

        def bind(name, t, ptr=None):
            if not t.is_contiguous():
                raise OnnxkitError(f"prepare_io_binding: {name!r} must be a contiguous tensor")
            io.bind_input(name, t.device.type, 0, types[name], list(t.size()), ptr or t.data_ptr())

        bind("input_ids", input_ids)
        for i, p in enumerate(past or []):
            # an empty past has no memory (address 0): any valid address serves, nothing is read
            bind(f"past_{i}", p, p.data_ptr() or input_ids.data_ptr())
        if attention_mask is not None:
            bind("attention_mask", attention_mask)
        if position_ids is not None:
            bind("position_ids", position_ids)
        for o in ort_session.get_outputs():
            buf = output_buffers[o.name]
            io.bind_output(o.name, buf.device.type, 0, types[o.name], output_shapes[o.name], buf.data_ptr())
        return io

    @staticmethod
    def get_outputs_from_io_binding_buffer(ort_session, output_buffers, output_shapes, return_numpy=True):
        """The outputs held in ``output_buffers`` (each the first elements of its buffer), copied:
        numpy arrays, or torch tensors when ``return_numpy`` is False."""
        out = []
        for o in ort_session.get_outputs():
            shape = output_shapes[o.name]
            v = output_buffers[o.name][:int(np.prod(shape))].reshape(shape)
            if hasattr(v, "clone"):
                v = v.clone().detach()
                out.append(v.cpu().numpy() if return_numpy else v)
            else:
                out.append(np.array(v))
        return out


class CudaSession:
    """A session run through one IOBinding of torch tensors (CUDA or CPU, by ``device``)."""

    def __init__(self, ort_session, device, enable_cuda_graph: bool = False):
        self.ort_session = ort_session
        self.input_names = [a.name for a in ort_session.get_inputs()]
        self.output_names = [a.name for a in ort_session.get_outputs()]
        self.io_name_to_onnx_type = TypeHelper.get_io_onnx_type_map(ort_session)
        self.io_name_to_torch_type = TypeHelper.get_io_torch_type_map(ort_session)
        self.io_binding = ort_session.io_binding()
        self.enable_cuda_graph = enable_cuda_graph
        self.input_tensors: dict = {}
        self.output_tensors: dict = {}
        self.device = device
        self.buffer_sharing: dict = {}   # input <-> output names that share one tensor

    def set_buffer_sharing(self, input_name: str, output_name: str) -> None:
        """Let output ``output_name`` be written into the tensor bound to input ``input_name``."""
        if input_name not in self.input_names or output_name not in self.output_names:
            raise OnnxkitError(f"set_buffer_sharing: {input_name!r} must be an input and {output_name!r} an output "
                               f"(inputs {self.input_names}, outputs {self.output_names})")
        self.buffer_sharing[input_name] = output_name
        self.buffer_sharing[output_name] = input_name

    def _bind(self, name: str, tensor, output: bool) -> None:
        index = tensor.device.index or 0
        shape = list(tensor.shape) or [1]   # a 0-d tensor is bound as one element, as onnxruntime's helper does
        bind = self.io_binding.bind_output if output else self.io_binding.bind_input
        bind(name, tensor.device.type, index, self.io_name_to_onnx_type[name], shape, tensor.data_ptr())

    def bind_input_and_buffer_sharing(self, name: str, tensor) -> None:
        """Bind input ``name`` to ``tensor``, and the output sharing its buffer to the same tensor."""
        self._bind(name, tensor, output=False)
        if name in self.buffer_sharing:
            self._bind(self.buffer_sharing[name], tensor, output=True)
            self.output_tensors[self.buffer_sharing[name]] = tensor

    def allocate_buffers(self, shape_dict: dict) -> None:
        """Allocate (or keep, where the shape is unchanged) the output tensors of ``shape_dict``'s
        outputs, and with ``enable_cuda_graph`` the fixed input tensors of its inputs."""
        import torch

        for name, shape in shape_dict.items():
            if not self.enable_cuda_graph or name not in self.input_names:
                continue
            if name in self.input_tensors:
                if tuple(self.input_tensors[name].shape) != tuple(shape):
                    raise OnnxkitError(f"input {name!r}: fixed input tensors (enable_cuda_graph) keep their shape "
                                       f"{list(self.input_tensors[name].shape)}, not {list(shape)}")
                continue
            tensor = torch.empty(tuple(shape), dtype=self.io_name_to_torch_type[name], device=self.device)
            self.input_tensors[name] = tensor
            self.bind_input_and_buffer_sharing(name, tensor)
        for name, shape in shape_dict.items():
            if name not in self.output_names or name in self.buffer_sharing:
                continue
            if name in self.output_tensors and tuple(self.output_tensors[name].shape) == tuple(shape):
                continue
            tensor = torch.empty(tuple(shape), dtype=self.io_name_to_torch_type[name], device=self.device)
            self.output_tensors[name] = tensor
            self._bind(name, tensor, output=True)

    def infer(self, feed_dict: dict, run_options=None, synchronize: bool = True) -> dict:
        """Bind ``feed_dict``'s tensors (contiguous torch tensors), run, and return the output
        tensors (``{name: tensor}``, the same tensors at each run)."""
        import torch

        for name, tensor in feed_dict.items():
            if not isinstance(tensor, torch.Tensor) or not tensor.is_contiguous():
                raise OnnxkitError(f"CudaSession.infer: {name!r} must be a contiguous torch tensor")
            if name not in self.input_names:
                continue
            if self.enable_cuda_graph:
                fixed = self.input_tensors.get(name)
                if fixed is None or fixed.nelement() != tensor.nelement() or fixed.dtype != tensor.dtype:
                    raise OnnxkitError(f"CudaSession.infer: {name!r} does not fit its fixed input tensor "
                                       "(allocate_buffers with its shape first)")
                fixed.copy_(tensor.reshape(fixed.shape))
            else:
                self.bind_input_and_buffer_sharing(name, tensor)
        if synchronize:
            self.io_binding.synchronize_inputs()
        self.ort_session.run_with_iobinding(self.io_binding, run_options)
        if synchronize:
            self.io_binding.synchronize_outputs()
        return self.output_tensors

    @staticmethod
    def get_cuda_provider_options(device_id: int, enable_cuda_graph: bool, stream: int = 0) -> dict:
        """The CUDA provider options these wrappers use (onnxkit's gpu backend keeps them)."""
        options = {"device_id": device_id, "arena_extend_strategy": "kSameAsRequested",
                   "enable_cuda_graph": enable_cuda_graph}
        if stream:
            options["user_compute_stream"] = str(stream)
        return options


class GpuBinding(CudaSession):
    """A :class:`CudaSession` with its buffers allocated for ``shape_dict`` and a graph id."""

    def __init__(self, ort_session, device, shape_dict: dict, enable_gpu_graph: bool = False, gpu_graph_id: int = -1,
                 stream: int = 0, buffer_sharing=None):
        super().__init__(ort_session, device, enable_gpu_graph)
        for input_name, output_name in (buffer_sharing or {}).items():
            self.set_buffer_sharing(input_name, output_name)
        self.allocate_buffers(shape_dict)
        self.gpu_graph_id = gpu_graph_id
        self.shape_dict = {k: list(v) for k, v in shape_dict.items()} if enable_gpu_graph else None
        self.stream = stream
        self.last_run_gpu_graph_id = None

    def get_run_options(self, disable_cuda_graph_in_run: bool = False):
        """RunOptions with the ``gpu_graph_id`` entry (-1 where the graph is not to be used)."""
        from ...runtime import RunOptions

        options = RunOptions()
        graph_id = -1 if disable_cuda_graph_in_run else self.gpu_graph_id
        options.add_run_config_entry("gpu_graph_id", str(graph_id))
        self.last_run_gpu_graph_id = graph_id
        return options

    def infer(self, feed_dict: dict, disable_cuda_graph_in_run: bool = False) -> dict:
        options = self.get_run_options(disable_cuda_graph_in_run)
        if self.stream:
            options.add_run_config_entry("disable_synchronize_execution_providers", "1")
        return super().infer(feed_dict, options)


class GpuBindingManager:
    """One :class:`GpuBinding` per input shape up to ``max_cuda_graphs`` (with a graph id each),
    and one more, without a graph, for every other shape."""

    def __init__(self, ort_session, device, stream: int = 0, max_cuda_graphs: int = 1):
        self.ort_session = ort_session
        self.device = device
        self.graph_bindings: list = []
        self.no_graph_binding = None
        self.stream = stream
        self.max_cuda_graphs = max_cuda_graphs

    def get_binding(self, shape_dict: dict, use_cuda_graph: bool = False, buffer_sharing=None) -> GpuBinding:
        wanted = {k: list(v) for k, v in shape_dict.items()}
        for binding in self.graph_bindings:
            if binding.shape_dict == wanted:
                return binding
        if not use_cuda_graph or len(self.graph_bindings) >= self.max_cuda_graphs:
            if self.no_graph_binding is None:
                self.no_graph_binding = GpuBinding(self.ort_session, self.device, shape_dict, stream=self.stream,
                                                   buffer_sharing=buffer_sharing)
            else:
                self.no_graph_binding.allocate_buffers(shape_dict)
            return self.no_graph_binding
        binding = GpuBinding(self.ort_session, self.device, shape_dict, enable_gpu_graph=True,
                             gpu_graph_id=len(self.graph_bindings), stream=self.stream, buffer_sharing=buffer_sharing)
        self.graph_bindings.append(binding)
        return binding
