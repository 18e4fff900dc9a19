"""``onnxruntime.capi._pybind_state``: the objects onnxruntime's native module exports
(``OrtValue``, ``OrtDevice``, ``SessionIOBinding``, ``OrtValueVector``, ``RunOptions``,
``SessionOptions``, the module functions ...), and its exception classes.  Here they are
onnxkit's classes; the native ``InferenceSession`` is onnxkit's ``InferenceSession``."""

from __future__ import annotations

from ...runtime import (  # noqa: F401
    ExecutionMode, GraphOptimizationLevel, InferenceSession, IOBinding, ModelMetadata, NodeArg, OrtValue, RunOptions,
    SessionOptions, get_available_providers, get_device,
)
from ...runtime.lora import LoraAdapter  # noqa: F401
from ...runtime.lora_files import AdapterFormat  # noqa: F401
from ...runtime.devices import (  # noqa: F401
    ArenaExtendStrategy, OrtAllocatorType, OrtArenaCfg, OrtDevice, OrtDeviceMemoryType, OrtDeviceVendorId, OrtEpDevice,
    OrtExecutionProviderDevicePolicy, OrtHardwareDevice, OrtHardwareDeviceType, OrtMemoryInfo,
    OrtMemoryInfoDeviceType, OrtMemType, create_and_register_allocator, create_and_register_allocator_v2,
    get_ep_devices,
)
from ...runtime.session_ort import OrtEpAssignedNode, OrtEpAssignedSubgraph  # noqa: F401
from ...runtime.sparse import OrtSparseFormat, SparseTensor  # noqa: F401
from ...status import (  # noqa: F401
    DeviceReset, EngineError, EPFail, Fail, InvalidArgument, InvalidGraph, InvalidProtobuf, ModelLoadCanceled,
    ModelLoaded, ModelRequiresCompilation, NoModel, NoSuchFile, NotFound, NotImplemented, RuntimeException,
)
from ..functions import (  # noqa: F401
    copy_tensors, disable_telemetry_events, enable_telemetry_events, get_all_providers, get_build_info, get_version_string,
    has_collective_ops, register_execution_provider_library, set_default_logger_callback,
    set_default_logger_severity, set_default_logger_verbosity, set_global_thread_pool_sizes, set_seed,
    unregister_execution_provider_library,
)
from .extras import (  # noqa: F401
    ExecutionOrder, OrtValueVector, SessionIOBinding, get_default_session_options, is_dlpack_uint,
)

from ..unsupported import (  # noqa: F401
    ModelCompiler, ModelPackage, ModelPackageComponentContext, ModelPackageContext,
    ModelPackageOptions, ModelPackageWriteMode, OrtCompileApiFlags, OrtEpContextData, OrtEpContextDataBuffer,
    OrtExternalInitializerInfo, OrtSyncStream,
)

kNextPowerOfTwo = ArenaExtendStrategy.kNextPowerOfTwo
kSameAsRequested = ArenaExtendStrategy.kSameAsRequested

__all__ = [n for n in dir() if not n.startswith("_") and n != "annotations"]
