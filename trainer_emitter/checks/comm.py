"""The one collective the checks gather their evidence with, and the device it runs on."""

from __future__ import annotations

import torch
import torch.distributed as dist

# all_gather_single where this torch has it (2.13 deprecates all_gather_into_tensor).
_all_gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


def comm_device(group: dist.ProcessGroup | None = None) -> torch.device:
    """Where the group's collectives take their tensors: this rank's GPU under NCCL, else CPU."""
    if dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def gather(tensor: torch.Tensor, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """Every group member's `tensor` stacked in group-rank order: shape (size, *tensor.shape).
    A collective of `group` (None: the default group)."""
    size = dist.get_world_size(group)
    local = tensor.contiguous().reshape(-1)
    out = torch.empty(size * local.numel(), dtype=local.dtype, device=local.device)
    _all_gather_single(out, local, group=group)
    return out.view(size, *tensor.shape)
