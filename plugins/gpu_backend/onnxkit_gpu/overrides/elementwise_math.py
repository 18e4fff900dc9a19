"""torch fast path of the elementwise math family (portable: ``onnxkit_default_domain/kernels/
elementwise_math.py``): Erf by ``torch.erf``, one native kernel instead of the portable
polynomial's twenty-odd (float16/bfloat16 computed in float32 and rounded back once, integer
input of Erf-9 in float64 and truncated, as the portable rules say)."""

from __future__ import annotations

from onnxkit.plugin import KernelTable

KERNELS = KernelTable()


@KERNELS.register("Erf", 9, 13)
def erf_kernel(ctx):
    import torch

    def run(x):
        if x.dtype in (torch.float32, torch.float64):
            return torch.erf(x)
        wide = torch.float32 if x.dtype.is_floating_point else torch.float64
        return torch.erf(x.to(wide)).to(x.dtype)
    return run
