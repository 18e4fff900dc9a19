"""The processor numba compiles for: its features, where numba targets this host.

The compiled loops that use a processor's own instructions (F16C conversions, AVX-512 VNNI
products) ask :func:`has` before they are chosen.  A feature counts only where numba's target is
the host processor (``NUMBA_CPU_NAME`` unset or ``host``): with another target (``generic``, for
caches shared between machines) an intrinsic of the host's would not compile, so every feature
reads as absent and the portable loops run.
"""

from __future__ import annotations

_FEATURES: list = []


def has(feature: str) -> bool:
    """Whether numba targets this host and llvmlite reports ``feature`` for it (llvmlite's names:
    ``"f16c"``, ``"avx512vnni"``); asked once a process, when a compiled loop is chosen."""
    if not _FEATURES:
        try:
            from numba.core import config
            import llvmlite.binding as llvm

            host = not config.CPU_NAME or config.CPU_NAME == "host"
            _FEATURES.append(dict(llvm.get_host_cpu_features()) if host else {})
        except (ImportError, RuntimeError, AttributeError):   # no llvmlite, or no host features
            _FEATURES.append({})
    return bool(_FEATURES[0].get(feature, False))
