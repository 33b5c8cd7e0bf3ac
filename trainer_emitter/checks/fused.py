"""The fingerprint of `checks/fingerprint.py` in one pass over the bytes: a Triton kernel.

The same two sums as the definition there (plain and position-weighted, int64, mod 2^64, over the
raw words), for many tensors at once: one launch per word width (1-, 2- and 4-byte words; an
8-byte element is two 4-byte words) reads every word of every tensor once, and one small
reduction adds the programs' partial sums. Two launches per width whatever the tensors' sizes or
number: a whole DDP bucket, or every parameter of a model, costs the same handful of launches.

How a program sums. Program (t, p) of a grid (tensors, programs) reads blocks p, p + P, p + 2P, …
of tensor t (P programs per tensor, BLOCK words per block). Each lane keeps two int64 registers:
`plain` (the sum of the words it read) and `running` (the sum, over its iterations, of `plain`
after each): after K iterations, `running` = Σ_k (K - k)·x_k, so Σ_k k·x_k = K·plain - running
and no multiplication runs inside the loop. The lane's word at iteration k sits at position
p·BLOCK + k·P·BLOCK + lane + 1, so its weighted sum is

    (p·BLOCK + lane + 1)·plain + P·BLOCK·(K·plain - running)

computed once after the loop. The lanes' sums, then the programs' (the second reduction), are
int64 sums: exact mod 2^64 in any order, so the result is bit-identical to the definition's on
every device, for every block size and program count.

The tensors are passed as a table of addresses and lengths (one int64 each), built once per set
of tensors and kept on the device (`_tables`, the last 64 sets): the weight check of the same parameters, or the
gradients of the same bucket, reuse it, so no step copies anything from the host or waits for it.

Triton is optional: `available(device)` is False without it, and for CPU tensors, and the
definition's torch path runs instead. The kernel itself is in `fused_kernel.py`, imported on
first use. The tests call `fingerprints` here directly on CPU tensors, with Triton's interpreter
(`TRITON_INTERPRET=1`), against the definition.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Sequence
from functools import cache
from typing import Any

import torch

DEFAULT_BLOCK = 1024
"""Words per block: with Triton's default of 4 warps, each thread reads 8 words per iteration
and keeps 16 int64 sums in registers. Not yet tuned on a GPU."""

DEFAULT_PROGRAMS = 1024
"""Programs per tensor at most (fewer for tensors under this many blocks); at most
MAX_PROGRAMS (a CUDA grid's second dimension)."""

MAX_PROGRAMS = 65535

_TABLES_KEPT = 64

_WORD_DTYPE = {1: torch.int8, 2: torch.int16, 4: torch.int32}


@cache
def _triton() -> Any:
    """`(triton, kernel module)`, or None when Triton is not installed. The kernels are built
    when their module is first imported, interpreted or compiled as `TRITON_INTERPRET` says then."""
    try:
        import triton

        from trainer_emitter.checks import fused_kernel
    except ImportError:
        return None
    return triton, fused_kernel


def interpreted() -> bool:
    """Triton runs its interpreter on the host (`TRITON_INTERPRET=1`), CPU tensors included."""
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


def available(device: torch.device) -> bool:
    """`fingerprint.fingerprints` runs the kernel for tensors on `device`: a GPU, with Triton
    installed. CPU tensors take the definition's torch path (the tests call `fingerprints` here
    directly under Triton's interpreter)."""
    return device.type == "cuda" and _triton() is not None


def fingerprints(
    words: Sequence[torch.Tensor],
    device: torch.device,
    *,
    block: int = DEFAULT_BLOCK,
    programs: int = DEFAULT_PROGRAMS,
) -> torch.Tensor:
    """`[plain, weighted]` per tensor of raw words (`fingerprint.raw_words`: flat, contiguous,
    int8/int16/int32, all on `device`), shape (len(words), 2), int64, on `device`. Asynchronous
    on a GPU: nothing waits for the host after the first call with the same tensors.

    `block`: words per block, a power of two; `programs`: programs per tensor at most. Neither
    changes the result."""
    found = _triton()
    if found is None:
        raise RuntimeError("the fused fingerprint needs Triton (pip install triton)")
    if device.type == "cuda" and device.index is None:  # "cuda" is the current GPU
        device = torch.device("cuda", torch.cuda.current_device())
    if device.type != "cuda" and not interpreted():
        raise ValueError(
            f"the fused fingerprint runs on a GPU (or with TRITON_INTERPRET=1), not on {device}"
        )
    triton, kernels = found
    if block < 1 or block & (block - 1):
        raise ValueError(f"block must be a power of two, not {block}")
    if not 1 <= programs <= MAX_PROGRAMS:
        raise ValueError(f"programs must be between 1 and {MAX_PROGRAMS}, not {programs}")
    for index, tensor in enumerate(words):
        if tensor.device != device:
            raise ValueError(f"tensor {index} is on {tensor.device}, not {device}")
        if tensor.dtype is not _WORD_DTYPE.get(tensor.element_size()) or tensor.dim() != 1:
            raise TypeError(
                f"tensor {index} ({tensor.dtype}, {tensor.dim()} dimensions) is not flat raw "
                "words (int8, int16 or int32)"
            )
        if not tensor.is_contiguous():
            raise ValueError(f"tensor {index} is not contiguous")
    groups = _tables(words, device)
    if len(groups) == 1 and groups[0].count == len(words):
        return groups[0].sums(kernels, triton, block, programs)
    result = torch.zeros((len(words), 2), dtype=torch.int64, device=device)
    for group in groups:
        result.index_copy_(0, group.indices, group.sums(kernels, triton, block, programs))
    return result


class _Group:
    """The tensors of one word width: their addresses, lengths and places, on the device."""

    def __init__(
        self, width: int, tensors: Sequence[tuple[int, torch.Tensor]], device: torch.device
    ):
        self.width = width
        self.count = len(tensors)
        self.longest = max(t.numel() for _, t in tensors)
        host = torch.tensor(
            [
                [t.data_ptr() for _, t in tensors],
                [t.numel() for _, t in tensors],
                [i for i, _ in tensors],
            ],
            dtype=torch.int64,
        )
        if device.type == "cuda":
            host = host.pin_memory()
        self.addresses, self.lengths, self.indices = host.to(device, non_blocking=True)

    def sums(self, kernels: Any, triton: Any, block: int, programs: int) -> torch.Tensor:
        count = min(programs, triton.cdiv(self.longest, block))
        partials = torch.empty(
            (self.count, count, 2), dtype=torch.int64, device=self.addresses.device
        )
        kernels.partial_sums[(self.count, count)](
            self.addresses, self.lengths, partials, WORD=kernels.WORDS[self.width], BLOCK=block
        )
        return partials.sum(dim=1)


_kept: OrderedDict[tuple[Any, ...], list[_Group]] = OrderedDict()


def _tables(words: Sequence[torch.Tensor], device: torch.device) -> list[_Group]:
    """The groups (one per word width present) for these tensors, kept for the next call with
    the same addresses and lengths: the same addresses and lengths make the same tables,
    whatever tensors they belong to now."""
    key = (device, *((t.data_ptr(), t.numel(), t.element_size()) for t in words))
    groups = _kept.get(key)
    if groups is not None:
        _kept.move_to_end(key)
        return groups
    by_width: dict[int, list[tuple[int, torch.Tensor]]] = {}
    for index, tensor in enumerate(words):
        if tensor.numel():
            by_width.setdefault(tensor.element_size(), []).append((index, tensor))
    groups = [_Group(width, tensors, device) for width, tensors in sorted(by_width.items())]
    _kept[key] = groups
    while len(_kept) > _TABLES_KEPT:
        _kept.popitem(last=False)
    return groups
