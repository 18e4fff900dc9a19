"""MaxPool on CUDA: the window maximum of the portable kernel computed by
``torch.nn.functional.max_pool{1,2,3}d`` over the input the portable kernel has padded (no
padding of torch's own, so the ONNX geometry and the ``ceil_mode`` tail stay the portable
kernel's; the values are the same).  On torch's CPU device elementwise maxima of strided
slices are faster, so the portable reduction is used there, as for the ``Indices`` output and
for more than three spatial axes.
"""

from __future__ import annotations

from onnxkit.plugin import KernelTable
from onnxkit_default_domain.api import max_pool_kernel

KERNELS = KernelTable()


def _use_native(x) -> bool:
    """torch's max_pool kernels beat elementwise maxima on CUDA; on the CPU device they do not."""
    return x.device.type == "cuda"


def native_max(xpad, a, out):
    """``F.max_pool{1,2,3}d`` over ``xpad`` (padded already), cut to ``out``; None to decline."""
    if not _use_native(xpad) or len(out) > 3 or 0 in out or 0 in xpad.shape[:2]:
        return None
    import torch.nn.functional as F

    fn = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[len(out)]
    y = fn(xpad, list(a.kernel), list(a.strides), 0, list(a.dilations))
    if list(y.shape[2:]) != list(out):
        y = y[(slice(None), slice(None)) + tuple(slice(0, o) for o in out)]
    return y


@KERNELS.register("MaxPool", 1, 8, 10, 11, 12, 22)
def max_pool(ctx):
    return max_pool_kernel(ctx, reduce=native_max)
