"""Rewrites of small model pieces into forms the XNNPACK partitioner accepts whole.

XNNPACK takes ``mean.dim`` only over the two innermost dims of a 4-D tensor and no slices of
dynamic-shape tensors. The originals (RMSNorm over the last dim of a 3-D tensor, rotate-half by
slicing) would each end a delegate, splitting every layer into several. The replacements compute
the same values: the norm's mean over a ``[..., dim, 1]`` view, the rotation as a linear with a
constant signed permutation (exact in float: entries are 0 and +-1).
"""

from __future__ import annotations

import torch
from torch import nn

from rne_tools.models import llama


class FourDimRMSNorm(nn.Module):
    def __init__(self, norm: llama.RMSNorm) -> None:
        super().__init__()
        self.dim, self.eps, self.weight = norm.dim, norm.eps, norm.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x4 = x.float().reshape(1, -1, self.dim, 1)
        x4 = x4 * torch.rsqrt((x4 * x4).mean((2, 3), keepdim=True) + self.eps)
        out = x4.reshape(1, -1, self.dim) if x.dim() == 3 else x4.reshape(1, self.dim)
        return self.weight * out.to(x.dtype)


class MatmulRotateHalf(nn.Module):
    def __init__(self, head_dim: int) -> None:
        super().__init__()
        half = head_dim // 2
        rotation = torch.zeros(head_dim, head_dim)
        # As a linear weight: out[j] = -x[j + half] for j < half, x[j - half] otherwise.
        rotation[torch.arange(half), torch.arange(half, head_dim)] = -1.0
        rotation[torch.arange(half, head_dim), torch.arange(half)] = 1.0
        self.register_buffer("rotation", rotation, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # F.linear (not matmul): XNNPACK takes it with any leading dims, dynamic ones included.
        return nn.functional.linear(x, self.rotation.to(x.dtype))


def use_xnnpack_friendly_modules(model: nn.Module) -> None:
    """Swap llama RMSNorm and RotateHalf modules for the equivalents above, in place."""
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, llama.RMSNorm):
                setattr(module, name, FourDimRMSNorm(child))
            elif isinstance(child, llama.RotateHalf):
                setattr(module, name, MatmulRotateHalf(module.head_dim))
