"""onnxruntime's device and memory description objects: ``OrtDevice``, ``OrtMemoryInfo``,
``OrtArenaCfg``, ``OrtEpDevice``, ``OrtHardwareDevice`` and their enumerations.

They describe where a value lives and how memory would be allocated.  onnxkit keeps values
as numpy arrays on the host or torch tensors (the gpu backend), and allocates with numpy and
torch, so these objects are descriptions only: an arena configuration is kept and reported
back as given, and registering an allocator (:func:`create_and_register_allocator`) is a
documented no-op.  A device type other than CPU or CUDA (GPU) is refused with a clear error.
"""

from __future__ import annotations

import enum
from typing import Optional

from ..errors import OnnxkitError


class OrtAllocatorType(enum.IntEnum):
    INVALID = -1
    ORT_DEVICE_ALLOCATOR = 0
    ORT_ARENA_ALLOCATOR = 1


class ArenaExtendStrategy(enum.IntEnum):
    """How an arena grows (``OrtArenaCfg.arena_extend_strategy``); described only, onnxkit has no arena."""

    kNextPowerOfTwo = 0
    kSameAsRequested = 1


class OrtMemType(enum.IntEnum):
    CPU_INPUT = -2
    CPU_OUTPUT = -1
    CPU = -1
    DEFAULT = 0


class OrtMemoryInfoDeviceType(enum.IntEnum):
    CPU = 0
    GPU = 1
    FPGA = 2
    NPU = 3


class OrtDeviceMemoryType(enum.IntEnum):
    DEFAULT = 0
    HOST_ACCESSIBLE = 5


class OrtHardwareDeviceType(enum.IntEnum):
    CPU = 0
    GPU = 1
    NPU = 2


class OrtExecutionProviderDevicePolicy(enum.IntEnum):
    DEFAULT = 0
    PREFER_CPU = 1
    PREFER_NPU = 2
    PREFER_GPU = 3
    MAX_PERFORMANCE = 4
    MAX_EFFICIENCY = 5
    MIN_OVERALL_POWER = 6


class OrtDeviceVendorId(enum.IntEnum):
    NONE = 0
    NVIDIA = 0x10DE


class OrtDevice:
    """A device: type (``OrtDevice.cpu()`` 0, ``cuda()`` 1), memory type, vendor and id."""

    _TYPES = {"cpu": 0, "cuda": 1, "gpu": 1}

    def __init__(self, device_type: int = 0, mem_type: int = 0, vendor_id: int = 0, device_id: int = 0):
        self._type, self._mem, self._vendor, self._id = int(device_type), int(mem_type), int(vendor_id), int(device_id)

    @staticmethod
    def cpu() -> int:
        return 0

    @staticmethod
    def cuda() -> int:
        return 1

    @staticmethod
    def dml() -> int:
        return 2

    @staticmethod
    def default_memory() -> int:
        return 0

    @classmethod
    def make(cls, device_type: str, device_id: int = 0) -> "OrtDevice":
        """``OrtDevice.make('cpu', 0)`` / ``make('cuda', 0)``."""
        kind = cls._TYPES.get(str(device_type).lower())
        if kind is None:
            raise OnnxkitError(f"OrtDevice: device type {device_type!r} is not one onnxkit has (cpu, cuda)")
        return cls(kind, 0, OrtDeviceVendorId.NVIDIA if kind == 1 else 0, device_id)

    def device_id(self) -> int:
        return self._id

    def device_type(self) -> int:
        return self._type

    def device_mem_type(self) -> int:
        return self._mem

    def device_vendor_id(self) -> int:
        return self._vendor

    def name(self) -> str:
        """``'cpu'`` or ``'cuda'`` (onnxkit's device type names, as :class:`OrtValue` uses)."""
        return "cuda" if self._type == 1 else "cpu"

    def __eq__(self, other) -> bool:
        return isinstance(other, OrtDevice) and (self._type, self._mem, self._vendor, self._id) == \
            (other._type, other._mem, other._vendor, other._id)

    def __hash__(self) -> int:
        return hash((self._type, self._mem, self._vendor, self._id))

    def __repr__(self) -> str:
        return f"OrtDevice({self.name()}:{self._id})"


class OrtMemoryInfo:
    """Where a value's memory is: ``OrtMemoryInfo(name, allocator type, device id, mem type)``.

    As in onnxruntime, the name tells the device: ``"Cuda"`` and ``"CudaPinned"`` are NVIDIA's
    (``device_vendor_id`` 0x10DE), ``"CudaPinned"`` host-accessible memory
    (``device_mem_type`` HOST_ACCESSIBLE); anything else is the host's (vendor 0, DEFAULT)."""

    def __init__(self, name: str = "Cpu", alloc_type=OrtAllocatorType.ORT_ARENA_ALLOCATOR, device_id: int = 0,
                 mem_type=OrtMemType.DEFAULT):
        self.name = str(name)
        self.allocator_type = OrtAllocatorType(int(alloc_type))
        self.device_id = int(device_id)
        self.mem_type = OrtMemType(int(mem_type))
        cuda = self.name.lower().startswith("cuda")
        self.device_vendor_id = int(OrtDeviceVendorId.NVIDIA) if cuda else 0
        self.device_mem_type = (OrtDeviceMemoryType.HOST_ACCESSIBLE if self.name.lower() == "cudapinned"
                                else OrtDeviceMemoryType.DEFAULT)

    @classmethod
    def create_v2(cls, name: str, device_type: int, vendor_id: int, device_id: int, mem_type: int,
                  alignment: int = 0, allocator_type=OrtAllocatorType.ORT_DEVICE_ALLOCATOR) -> "OrtMemoryInfo":
        """From a device description: ``mem_type`` is an :class:`OrtDeviceMemoryType`; host-accessible
        memory reads back as ``mem_type`` CPU_OUTPUT (onnxruntime's mapping), DEFAULT as DEFAULT."""
        device_mem = OrtDeviceMemoryType(int(mem_type))
        kept = OrtMemType.CPU_OUTPUT if device_mem == OrtDeviceMemoryType.HOST_ACCESSIBLE else OrtMemType.DEFAULT
        info = cls(name, allocator_type, device_id, kept)
        info.device_type = OrtMemoryInfoDeviceType(int(device_type))
        info.device_vendor_id = int(vendor_id)
        info.device_mem_type = device_mem
        info.alignment = int(alignment)
        return info

    @property
    def vendor_id(self) -> int:
        return self.device_vendor_id

    @property
    def device(self) -> OrtDevice:
        kind = getattr(self, "device_type", 1 if self.name.lower().startswith("cuda") else 0)
        return OrtDevice(kind, 0, 0, self.device_id)

    def __eq__(self, other) -> bool:
        return isinstance(other, OrtMemoryInfo) and (self.name, self.allocator_type, self.device_id, self.mem_type) == \
            (other.name, other.allocator_type, other.device_id, other.mem_type)

    def __repr__(self) -> str:
        return (f"OrtMemoryInfo(name={self.name!r}, allocator_type={self.allocator_type.name}, "
                f"device_id={self.device_id}, mem_type={self.mem_type.name})")


def memory_info_of(device_name: str) -> OrtMemoryInfo:
    """The memory info of a value on onnxkit's ``'cpu'`` or ``'cuda'``."""
    if device_name == "cuda":
        return OrtMemoryInfo("Cuda", OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, OrtMemType.DEFAULT)
    return OrtMemoryInfo("Cpu", OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, OrtMemType.DEFAULT)


_ARENA_KEYS = ("max_mem", "arena_extend_strategy", "initial_chunk_size_bytes", "max_dead_bytes_per_chunk",
               "initial_growth_chunk_size_bytes", "max_power_of_two_extend_bytes")


class OrtArenaCfg:
    """An arena configuration, ``OrtArenaCfg(max_mem, arena_extend_strategy,
    initial_chunk_size_bytes, max_dead_bytes_per_chunk)`` or ``OrtArenaCfg({key: int})``.

    Kept and readable (onnxkit allocates with numpy and torch: there is no arena to configure);
    an unknown key is refused."""

    def __init__(self, *args):
        values = dict.fromkeys(_ARENA_KEYS, -1)
        values["max_mem"] = 0
        if len(args) == 1 and isinstance(args[0], dict):
            for k, v in args[0].items():
                if k not in _ARENA_KEYS:
                    raise OnnxkitError(f"OrtArenaCfg: unknown option {k!r}; known: {list(_ARENA_KEYS)}")
                values[k] = int(v)
        elif len(args) == 4:
            values.update(zip(_ARENA_KEYS[:4], (int(a) for a in args)))
        elif args:
            raise OnnxkitError("OrtArenaCfg takes four ints (max_mem, arena_extend_strategy, "
                               "initial_chunk_size_bytes, max_dead_bytes_per_chunk) or one dict")
        for k, v in values.items():
            setattr(self, k, v)


def create_and_register_allocator(mem_info: OrtMemoryInfo, arena_cfg: Optional[OrtArenaCfg] = None) -> None:
    """onnxruntime shares an allocator between sessions; onnxkit allocates with numpy and torch,
    so this registers nothing (a documented no-op) after checking its arguments."""
    if not isinstance(mem_info, OrtMemoryInfo):
        raise OnnxkitError(f"create_and_register_allocator: mem_info must be an OrtMemoryInfo, "
                           f"not {type(mem_info).__name__}")
    if arena_cfg is not None and not isinstance(arena_cfg, OrtArenaCfg):
        raise OnnxkitError("create_and_register_allocator: arena_cfg must be an OrtArenaCfg or None")


def create_and_register_allocator_v2(provider_type: str, mem_info: OrtMemoryInfo, provider_options: dict,
                                     arena_cfg: Optional[OrtArenaCfg] = None) -> None:
    """As :func:`create_and_register_allocator` (a no-op), for one provider."""
    create_and_register_allocator(mem_info, arena_cfg)


class OrtHardwareDevice:
    """A piece of hardware an execution provider can use."""

    def __init__(self, type_: int, vendor: str, vendor_id: int = 0, device_id: int = 0, metadata=None):
        self.type = OrtHardwareDeviceType(type_)
        self.vendor = vendor
        self.vendor_id = vendor_id
        self.device_id = device_id
        self.metadata = dict(metadata or {})

    def __repr__(self) -> str:
        return f"OrtHardwareDevice({self.type.name}, {self.vendor!r})"


class OrtEpDevice:
    """An (execution provider, hardware device) pair, as :func:`get_ep_devices` lists them."""

    def __init__(self, ep_name: str, device: OrtHardwareDevice, ep_vendor: str = "onnxkit"):
        self.ep_name = ep_name
        self.ep_vendor = ep_vendor
        self.device = device
        self.ep_metadata: dict = {}
        self.ep_options: dict = {}

    def create_sync_stream(self):
        """onnxruntime's device stream for this device: onnxkit's gpu backend synchronizes on
        torch's stream, so this raises ``NotImplementedError`` naming the feature."""
        raise NotImplementedError("device synchronization streams (OrtEpDevice.create_sync_stream) are not "
                                  "implemented by onnxkit: its gpu backend uses torch's current stream")

    def memory_info(self, memory_type=OrtDeviceMemoryType.DEFAULT) -> OrtMemoryInfo:
        return memory_info_of("cuda" if self.device.type == OrtHardwareDeviceType.GPU else "cpu")

    def __repr__(self) -> str:
        return f"OrtEpDevice({self.ep_name}, {self.device!r})"


def get_ep_devices() -> list:
    """One :class:`OrtEpDevice` per available provider (onnxruntime's ``get_ep_devices``)."""
    from .providers import get_available_providers

    out = []
    for p in get_available_providers():
        kind = OrtHardwareDeviceType.GPU if p == "CUDAExecutionProvider" else OrtHardwareDeviceType.CPU
        out.append(OrtEpDevice(p, OrtHardwareDevice(kind, "NVIDIA" if kind else "onnxkit")))
    return out
