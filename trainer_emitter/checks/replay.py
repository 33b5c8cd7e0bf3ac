"""Check 2's local half: recompute a micro-batch with the unwrapped module, leaving no trace.

A `Package` is what a rank needs to recompute another rank's micro-batch bit for bit: the batch,
the RNG state before that rank's forward (dropout masks), and the module's buffers as that forward
saw them (after DDP's buffer broadcast). `recompute` runs the loss function on the plain module,
with no collectives, and restores this rank's gradients, buffers and RNG state afterwards.
"""

from __future__ import annotations

import ctypes
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from trainer_emitter.checks.fingerprint import DEFAULT_CHUNK_ELEMENTS, fingerprint, fingerprints

LossFn = Callable[[torch.nn.Module, Any], torch.Tensor]
"""`loss_fn(module, batch) -> scalar loss`: called with the DDP model in training and with the
plain module in a replay, so it must not depend on which it gets."""


@dataclass
class Package:
    batch: Any
    cpu_rng: torch.Tensor
    cuda_rng: torch.Tensor | None = None
    buffers: dict[str, torch.Tensor] = field(default_factory=dict)

    @classmethod
    def capture(cls, batch: Any, device: torch.device) -> Package:
        """The batch and the RNG state now (call right before the forward)."""
        cuda_rng = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
        return cls(batch=batch, cpu_rng=torch.get_rng_state(), cuda_rng=cuda_rng)

    def to_bytes(self) -> bytes:
        out = io.BytesIO()
        torch.save(
            {
                "batch": self.batch,
                "cpu_rng": self.cpu_rng,
                "cuda_rng": self.cuda_rng,
                "buffers": self.buffers,
            },
            out,
        )
        return out.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, device: torch.device) -> Package:
        raw = torch.load(io.BytesIO(data), map_location=device, weights_only=True)
        return cls(
            batch=raw["batch"],
            cpu_rng=raw["cpu_rng"].cpu(),
            cuda_rng=None if raw["cuda_rng"] is None else raw["cuda_rng"].cpu(),
            buffers=raw["buffers"],
        )


def snapshot_buffers(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: buffer.detach().clone() for name, buffer in module.named_buffers()}


def make_record(
    loss: torch.Tensor,
    grad_fingerprints: torch.Tensor | None,
    parameter_count: int,
    device: torch.device,
    *,
    chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
) -> torch.Tensor:
    """`[loss plain, loss weighted, grad 0 plain, grad 0 weighted, …]`, int64, on `device`;
    the gradient part is zeros when gradients are not compared."""
    grads = (
        torch.zeros(2 * parameter_count, dtype=torch.int64, device=device)
        if grad_fingerprints is None
        else grad_fingerprints.reshape(-1).to(device)
    )
    return torch.cat([fingerprint(loss, chunk_elements=chunk_elements).to(device), grads])


def recompute(
    module: torch.nn.Module,
    loss_fn: LossFn,
    package: Package,
    *,
    parameters: Sequence[torch.nn.Parameter],
    with_grads: bool,
    device: torch.device,
    chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
) -> torch.Tensor:
    """Recompute `package` on `module` and return its result record (see `make_record`).

    Gradients come from `torch.autograd.grad`, so no `.grad` is written and no DDP hook fires; the
    `.grad` references, the buffers and the RNG state (CPU and the current CUDA device) are put
    back whatever happens."""
    saved_grads = [p.grad for p in parameters]
    live_buffers = snapshot_buffers(module) if package.buffers else {}
    cuda_devices = [package_device(device)] if package.cuda_rng is not None else []
    try:
        with torch.random.fork_rng(devices=cuda_devices):
            torch.set_rng_state(package.cpu_rng)
            if package.cuda_rng is not None:
                torch.cuda.set_rng_state(package.cuda_rng, device)
            _load_buffers(module, package.buffers)
            with torch.enable_grad():
                loss = loss_fn(module, package.batch)
                grad_fps = None
                if with_grads:
                    trainable = [p for p in parameters if p.requires_grad]
                    grads = iter(torch.autograd.grad(loss, trainable, allow_unused=True))
                    grad_fps = fingerprints(
                        (next(grads) if p.requires_grad else None for p in parameters),
                        device=device,
                        chunk_elements=chunk_elements,
                    )
            return make_record(
                loss.detach(), grad_fps, len(parameters), device, chunk_elements=chunk_elements
            )
    finally:
        _load_buffers(module, live_buffers)
        for parameter, grad in zip(parameters, saved_grads, strict=True):
            parameter.grad = grad


def package_device(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()


def tensor_bytes(tensor: torch.Tensor) -> bytes:
    """The bytes of a uint8 tensor (no numpy needed)."""
    flat = tensor.detach().to("cpu").contiguous()
    return ctypes.string_at(flat.data_ptr(), flat.numel()) if flat.numel() else b""


def _load_buffers(module: torch.nn.Module, buffers: dict[str, torch.Tensor]) -> None:
    if not buffers:
        return
    with torch.no_grad():
        for name, buffer in module.named_buffers():
            if name in buffers:
                buffer.copy_(buffers[name])
