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
    """PCI vendor ids (onnxruntime's ``OrtDevice::VendorIds``)."""

    NONE = 0x0000
    AMD = 0x1002
    NVIDIA = 0x10DE
    ARM = 0x13B5
    MICROSOFT = 0x1414
    HUAWEI = 0x19E5
    QUALCOMM = 0x5143
    INTEL = 0x8086


#: onnxruntime's device type numbers (``OrtDevice.cpu()`` ...) and its device names' types and
#: vendors (``OrtDevice.make``); only ``cpu`` and ``cuda`` hold values in onnxkit.
_TYPE_NUMBERS = {"cpu": 0, "gpu": 1, "cuda": 1, "webgpu": 1, "fpga": 2, "npu": 3, "cann": 3, "dml": 4}
_NAME_VENDORS = {"cuda": OrtDeviceVendorId.NVIDIA, "dml": OrtDeviceVendorId.MICROSOFT,
                 "cann": OrtDeviceVendorId.HUAWEI, "webgpu": OrtDeviceVendorId.NONE}
_NAMES = ("cpu", "cuda", "cann", "dml", "webgpu", "gpu", "npu")


class OrtDevice:
    """A device: type, memory type, vendor and id, as onnxruntime's native ``OrtDevice``:
    ``OrtDevice(type, mem_type, vendor_id, device_id)`` or ``OrtDevice(type, mem_type, device_id)``
    (vendor 0), or ``OrtDevice.make(name, device_id, vendor_id=-1)``.  The type numbers are
    onnxruntime's (``cpu()`` 0, ``gpu()``/``cuda()`` 1, ``fpga()`` 2, ``npu()``/``cann()`` 3,
    ``dml()`` 4, which becomes a GPU of vendor Microsoft, as onnxruntime holds it).  Any device
    can be described; a value can be put on one that is the host
    (:meth:`cpu`, or host-accessible memory) or an NVIDIA (or vendor-less) GPU, onnxkit's
    ``cuda`` (:func:`value_device`)."""

    def __init__(self, device_type: int = 0, mem_type: int = 0, *vendor_and_id):
        if len(vendor_and_id) > 2:
            raise OnnxkitError("OrtDevice takes (type, mem_type, vendor_id, device_id) or (type, mem_type, device_id)")
        vendor, device_id = ((0, 0), (0, *vendor_and_id), vendor_and_id)[len(vendor_and_id)]
        self._type, self._mem, self._vendor, self._id = int(device_type), int(mem_type), int(vendor), int(device_id)
        if self._type == 4:  # onnxruntime holds DirectML as a GPU of Microsoft's
            self._type, self._vendor = 1, int(OrtDeviceVendorId.MICROSOFT)

    @staticmethod
    def cpu() -> int:
        return 0

    @staticmethod
    def cuda() -> int:
        return 1

    @staticmethod
    def gpu() -> int:
        return 1

    @staticmethod
    def webgpu() -> int:
        return 1

    @staticmethod
    def fpga() -> int:
        return 2

    @staticmethod
    def npu() -> int:
        return 3

    @staticmethod
    def cann() -> int:
        return 3

    @staticmethod
    def dml() -> int:
        return 4

    @staticmethod
    def default_memory() -> int:
        return 0

    @classmethod
    def make(cls, device_type: str, device_id: int = 0, vendor_id: int = -1) -> "OrtDevice":
        """``OrtDevice.make('cpu', 0)`` / ``make('cuda', 0)`` (onnxruntime's names: cpu, cuda,
        cann, dml, webgpu, gpu, npu; a ``vendor_id`` of 0 or more overrides the name's vendor)."""
        name = str(device_type).lower()
        if name not in _NAMES:
            raise OnnxkitError(f"OrtDevice: unsupported device type {device_type!r} (onnxruntime's names: "
                               f"{', '.join(_NAMES)})")
        vendor = int(vendor_id) if int(vendor_id) >= 0 else int(_NAME_VENDORS.get(name, 0))
        return cls(_TYPE_NUMBERS[name], 0, vendor, device_id)

    def _get_c_device(self) -> "OrtDevice":
        """onnxruntime's wrapper hands its native device on; here both are this object."""
        return self

    def device_id(self) -> int:
        return self._id

    def device_type(self) -> int:
        return self._type

    def device_mem_type(self) -> int:
        return self._mem

    def mem_type(self) -> int:
        return self._mem

    def device_vendor_id(self) -> int:
        return self._vendor

    def vendor_id(self) -> int:
        return self._vendor

    def name(self) -> str:
        """onnxkit's name of the device a value on it is held on (``'cpu'`` or ``'cuda'``);
        raises :class:`OnnxkitError` for a device onnxkit holds no values on."""
        return value_device(self)[0]

    def __eq__(self, other) -> bool:
        return isinstance(other, OrtDevice) and (self._type, self._mem, self._vendor, self._id) == \
            (other._type, other._mem, other._vendor, other._id)

    def __hash__(self) -> int:
        return hash((self._type, self._mem, self._vendor, self._id))

    def __repr__(self) -> str:
        kind = {0: "cpu", 1: "gpu", 2: "fpga", 3: "npu"}.get(self._type, f"type {self._type}")
        if self._type == 1:
            names = {0: "cuda", OrtDeviceVendorId.NVIDIA: "cuda", OrtDeviceVendorId.MICROSOFT: "dml"}
            kind = names.get(self._vendor, kind)
        return f"OrtDevice({kind}:{self._id})"


def value_device(device, device_id: int = 0, vendor_id: int = -1) -> tuple:
    """``(name, id)`` of the device a value goes to, ``name`` ``'cpu'`` or ``'cuda'``: from an
    onnxruntime device name (``'cpu'``, ``'cuda'``, any case) and ``device_id``, or from an
    :class:`OrtDevice` (its own id): the host type, or host-accessible memory of any device, is
    ``cpu``; a GPU of NVIDIA or of no vendor is ``cuda``.  Other devices (dml, cann, npu, fpga,
    other GPU vendors, names onnxruntime does not have) raise :class:`OnnxkitError` naming them."""
    if isinstance(device, OrtDevice):
        if device._type == 0 or device._mem == OrtDeviceMemoryType.HOST_ACCESSIBLE:
            return "cpu", device._id
        if device._type == 1 and device._vendor in (0, OrtDeviceVendorId.NVIDIA):
            return "cuda", device._id
        raise OnnxkitError(f"{device!r} (type {device._type}, vendor {device._vendor:#x}) is not a device onnxkit "
                           "holds values on: the host (cpu) or an NVIDIA GPU (cuda)")
    if not isinstance(device, str):
        raise OnnxkitError(f"a device must be a name ('cpu', 'cuda') or an OrtDevice, not {type(device).__name__}")
    name = device.lower()
    if name == "cpu":
        return "cpu", int(device_id)
    if name == "cuda" and int(vendor_id) in (-1, 0, OrtDeviceVendorId.NVIDIA):
        return "cuda", int(device_id)
    raise OnnxkitError(f"device type must be 'cpu' or 'cuda' (onnxkit holds values on the host or an NVIDIA GPU), "
                       f"not {device!r}")


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
        """The device this memory is on (its memory type kept: host-accessible memory of a GPU is
        host memory to :func:`value_device`)."""
        kind = getattr(self, "device_type", 1 if self.name.lower().startswith("cuda") else 0)
        return OrtDevice(kind, int(self.device_mem_type), self.device_vendor_id, self.device_id)

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
