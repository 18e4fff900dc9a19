"""onnxkit standing in for onnxruntime: the ``onnxruntime`` module, submodules included.

    import onnxkit
    onnxkit.install_as_onnxruntime()      # from now on the onnxruntime module is this one

after which a program's own ``import onnxruntime as ort`` (and of ``onnxruntime.capi``,
``.backend``, ``.datasets``, ...) gets onnxkit,

or, without changing the program: ``python -m onnxkit.ort script.py args``,
``python -m onnxkit.ort -m module args``, ``onnxkit exec -- CMD ARGS``.

The names are onnxruntime's public Python API (its documentation's and its Python tests'),
each with onnxruntime's documented behaviour on onnxkit's runtime: :class:`InferenceSession`,
:class:`SessionOptions`, :class:`RunOptions`, :class:`OrtValue`, :class:`IOBinding`,
:class:`SparseTensor`, LoRA adapters (:class:`AdapterFormat`, :class:`LoraAdapter`:
:mod:`onnxkit.runtime.lora`, :mod:`onnxkit.runtime.lora_files`), the device and memory descriptions, the enumerations and the
module functions (:mod:`onnxkit.ort.functions`).  Submodules: ``capi`` (``_pybind_state``,
``onnxruntime_pybind11_state`` with the status exception classes, ``onnxruntime_inference_collection``),
``backend`` (onnx's backend API), ``datasets`` (example models) and ``transformers.io_binding_helper``.
What cannot mean anything here (telemetry, arenas, allocator sharing) is a documented no-op;
what onnxkit does not do (native custom-operator and execution-provider libraries, model
compilation) raises ``NotImplementedError`` or :class:`onnxkit.OnnxkitError`
naming the feature.  Nothing here imports onnxruntime.
"""

from __future__ import annotations

from ..runtime import (  # noqa: F401
    ExecutionMode, GraphOptimizationLevel, InferenceSession, IOBinding, ModelMetadata, NodeArg, OrtValue, RunOptions,
    SessionOptions, get_available_providers, get_device,
)
from ..runtime.lora import LoraAdapter  # noqa: F401
from ..runtime.lora_files import AdapterFormat  # noqa: F401
from ..runtime.devices import (  # noqa: F401
    ArenaExtendStrategy, OrtAllocatorType, OrtArenaCfg, OrtDevice, OrtDeviceMemoryType, OrtDeviceVendorId, OrtEpDevice,
    OrtExecutionProviderDevicePolicy, OrtHardwareDevice, OrtHardwareDeviceType, OrtMemoryInfo,
    OrtMemoryInfoDeviceType, OrtMemType, create_and_register_allocator, create_and_register_allocator_v2,
    get_ep_devices,
)
from ..runtime.session_ort import OrtEpAssignedNode, OrtEpAssignedSubgraph  # noqa: F401
from ..runtime.sparse import OrtSparseFormat, SparseTensor  # noqa: F401
from .functions import (  # noqa: F401
    ORT_API_VERSION, copy_tensors, disable_telemetry_events, enable_telemetry_events, get_all_providers, get_build_info,
    get_version_string, has_collective_ops, preload_dlls, print_debug_info, register_execution_provider_library,
    set_default_logger_callback, set_default_logger_severity, set_default_logger_verbosity,
    set_global_thread_pool_sizes, set_seed, unregister_execution_provider_library,
)
from .install import install_as_onnxruntime, uninstall  # noqa: F401
from .unsupported import (  # noqa: F401
    ModelCompiler, ModelPackage, ModelPackageComponentContext, ModelPackageContext,
    ModelPackageOptions, ModelPackageWriteMode, OrtCompileApiFlags, OrtEpContextData, OrtEpContextDataBuffer,
    OrtExternalInitializerInfo, OrtSyncStream,
)
from . import capi  # noqa: F401
from .capi.extras import ExecutionOrder, SessionIOBinding  # noqa: F401

__version__ = ORT_API_VERSION
version = ORT_API_VERSION
package_name = "onnxkit"
cuda_version = ""
onnxruntime_validation = None

#: Submodules reached as attributes (``onnxruntime.datasets.get_example``) imported on first use.
_SUBMODULES = ("backend", "datasets", "transformers")


def __getattr__(name):
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'onnxruntime' (onnxkit's stand-in) has no attribute {name!r}")
