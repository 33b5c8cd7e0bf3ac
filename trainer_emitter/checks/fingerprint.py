"""Fingerprints: two int64 sums over a tensor's raw bits.

For a tensor read as a flat sequence of integers x_1 … x_n (its raw bits, see below):

    plain    = x_1 + x_2 + … + x_n           (mod 2^64)
    weighted = 1·x_1 + 2·x_2 + … + n·x_n     (mod 2^64, positions from 1)

The integers are the raw bit patterns, sign-extended: a 1-, 2- or 4-byte element is one integer
(int8 / int16 / int32 view), an 8-byte element is two consecutive 32-bit words (so n is twice the
element count). The values are never read as numbers: +0.0 and -0.0 differ, every NaN payload
differs, and the result is the same on every device and for every summation order (integer sums
mod 2^64 are exact).

Why it catches every change of one or two elements for tensors under 2^32 elements: one changed
integer moves `plain` by its change d, 0 < |d| < 2^32, so `plain` moves. Two changed integers
at positions i < j with changes a, b leave both sums unchanged only if b = -a and (j - i)·a = 0
mod 2^64; but |a| < 2^32 and 0 < j - i < 2^33 hold at most 31 and 32 factors of two, 63 in all,
so (j - i)·a is never a multiple of 2^64. For 8-byte dtypes a change of one element touches at
most two words, so it is caught; so is any change of two elements that touches at most two words
in all (any two bit flips, any change confined to one word of each). Reading 8-byte elements as
whole int64 values instead would miss two sign flips at an even distance (each adds 2^63); no
pair of 64-bit sums can catch every change of all four words of two 8-byte elements.

How the sums are computed. This module is the definition, and the path for CPU tensors (and for
GPU tensors where Triton is missing); on a GPU, `checks/fused.py` computes the same two sums in
one kernel pass, bit-identical. Here the words run chunk by chunk through one reused buffer: each
chunk is copied into it as float64 (every word |x| ≤ 2^31 is exact there), then summed along the
rows and along the columns of a (rows, 64) view. Position j·size + r·64 + c + 1 (chunk j, row r,
column c) makes

    weighted = Σ_j j·size·(sum of chunk j) + Σ_r 64·r·(sum of row r) + Σ_c (c+1)·(sum of column c)

(rows and columns summed over all chunks), so no position vector is built and each chunk is read
twice from cache after one widening copy. The float64 sums are exact: every partial sum is an
integer under 2^53 in magnitude (a row of 64 words under 2^37, a column of at most 2^20 rows
under 2^51), whatever order the reduction adds in. Chunks go in groups (at most 128, and at most
2^21 rows in all): within a group the row and column sums are added in float64, and Σ_k k·(sum
of chunk k) comes from a running sum of the row totals (after K chunks, Σ_k (K - k)·rows_k), all
under 2^52; after each group they are converted, exactly, and folded into int64 totals, which
are exact mod 2^64 in any order. So the result does not depend on the chunk size or the device.

Temporary memory is bounded whatever the tensor's size: the buffer (8 bytes per word of
`chunk_elements`, 1 MiB by default), plus a few float64 and int64 vectors of chunk_elements / 64
row totals (16 KiB each by default) and a few of 64.

Speed on a CPU, against numpy's exact int64 sum of the same words (`np.sum(words,
dtype=np.int64)`, one core, `make bench ARGS=fingerprint`): 0.76 to 0.85 for float32 tensors
and 0.74 to 0.79 for bfloat16 in runs on a shared, busy two-core machine, against 0.43 to 0.52
before this path; 0.9 was reached only in a few quieter measurements. The reason, measured: one
read of the words is the floor and torch has no fused "widen and reduce along two axes". Its
integer reductions with a `dtype` argument are not vectorised (half as fast as widening first),
int64 reductions run at half the speed of float64 ones, so the float64 copy plus two cached
float64 reductions is the fastest exact route found: the widening copy alone runs at 1.3 to 1.4
times numpy's exact sum, the two reductions and the small per-chunk additions take the rest.
Measured alternatives that were slower, all exact: int64 widening and int64 row and column sums
(the previous path: 0.43 to 0.52); widening the whole tensor at once and multiplying by a
position vector (about 30 times slower); summing the words wrapped in int32 and recovering the
carries from exact sums of their top bits (one more elementwise pass and two more reductions);
float64 matmul with two weight columns (0.6 to 0.85: BLAS is slow for two columns); float64
sums with a `dtype` argument on the int32 words (about 0.5). Chunks of 2^17 words beat 2^18
(a 2 MiB buffer falls out of cache) and 2^16 (more Python per byte).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import torch

from trainer_emitter.checks import fused

DEFAULT_CHUNK_ELEMENTS = 1 << 17
"""Integers per chunk: the float64 buffer is 8 times this many bytes (1 MiB)."""

MAX_CHUNK_ELEMENTS = 1 << 26
"""Integers per chunk at most: a row total over a chunk stays under 2^51 (exact in float64)."""

_COLUMNS = 64
_GROUP_CHUNKS = 128
"""Chunks summed in float64 before their sums are folded into the int64 totals."""
_GROUP_ROWS = 1 << 21
"""Chunks per group times rows per chunk at most: a column's total over a group < 2^52."""
_INT_VIEW = {1: torch.int8, 2: torch.int16, 4: torch.int32}


def raw_words(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor's raw bits as a flat integer tensor (int8/int16/int32; 8-byte elements as two
    int32 words). Non-contiguous tensors are copied to a contiguous one first."""
    flat = tensor.detach()
    if not flat.is_contiguous():
        flat = flat.contiguous()
    flat = flat.reshape(-1)
    if flat.dtype is torch.bool:
        flat = flat.view(torch.uint8)
    size = flat.element_size()
    if size in _INT_VIEW:
        return flat.view(_INT_VIEW[size])
    if size == 8:
        return flat.view(torch.int32)
    raise TypeError(f"cannot fingerprint dtype {flat.dtype}: elements of {size} bytes")


def fingerprint(
    tensor: torch.Tensor, *, chunk_elements: int = DEFAULT_CHUNK_ELEMENTS
) -> torch.Tensor:
    """`[plain, weighted]` as an int64 tensor of shape (2,) on the tensor's device.

    Stays on the device (no host synchronisation), so it can run inside a DDP communication hook;
    `fingerprint_ints` gives Python ints. On a GPU with Triton installed the fused kernel
    (`checks/fused.py`) computes it; elsewhere the chunked sums described above."""
    if not _COLUMNS <= chunk_elements <= MAX_CHUNK_ELEMENTS:
        raise ValueError(
            f"chunk_elements must be between {_COLUMNS} and {MAX_CHUNK_ELEMENTS}, "
            f"not {chunk_elements}"
        )
    words = raw_words(tensor)
    device = words.device
    if fused.available(device):
        return fused.fingerprints([words], device)[0]
    return chunked_sums(words, chunk_elements)


def chunked_sums(words: torch.Tensor, chunk_elements: int = DEFAULT_CHUNK_ELEMENTS) -> torch.Tensor:
    """The chunked torch path of `fingerprint` on raw words (`raw_words`), on any device:
    `fingerprint` takes it wherever the fused kernel does not run."""
    device = words.device
    total = words.numel()
    if total == 0:
        return torch.zeros(2, dtype=torch.int64, device=device)
    rows = max(1, min(chunk_elements, total + _COLUMNS - 1) // _COLUMNS)
    size = rows * _COLUMNS
    per_group = max(1, min(_GROUP_CHUNKS, _GROUP_ROWS // rows))
    buffer = torch.empty(size, dtype=torch.float64, device=device)
    matrix = buffer.view(rows, _COLUMNS)
    row_sums = torch.empty(rows, dtype=torch.float64, device=device)
    column_sums = torch.empty(_COLUMNS, dtype=torch.float64, device=device)
    rows_group = torch.zeros(rows, dtype=torch.float64, device=device)
    running = torch.zeros(rows, dtype=torch.float64, device=device)
    columns_group = torch.zeros(_COLUMNS, dtype=torch.float64, device=device)
    rows_total = torch.zeros(rows, dtype=torch.int64, device=device)
    columns_total = torch.zeros(_COLUMNS, dtype=torch.int64, device=device)
    by_chunk = torch.zeros((), dtype=torch.int64, device=device)  # Σ_j j·(sum of chunk j)
    chunks = range(0, total, size)
    for first in range(0, len(chunks), per_group):
        group = chunks[first : first + per_group]
        for start in group:
            piece = words[start : start + size]
            count = piece.numel()
            if count < size:  # the tail: zeros add nothing to either sum
                buffer[count:].zero_()
            buffer[:count].copy_(piece)
            torch.sum(matrix, 1, out=row_sums)
            torch.sum(matrix, 0, out=column_sums)
            rows_group.add_(row_sums)
            running.add_(rows_group)
            columns_group.add_(column_sums)
        # Fold the group into the int64 totals; within it Σ_k k·(sum of chunk k) is
        # len(group)·Σ rows_group - Σ running, and chunk k is chunk first + k of the tensor.
        group_rows = rows_group.to(torch.int64)
        group_sum = group_rows.sum()
        by_chunk += group_sum * (first + len(group)) - running.to(torch.int64).sum()
        rows_total += group_rows
        columns_total += columns_group.to(torch.int64)
        rows_group.zero_()
        running.zero_()
        columns_group.zero_()
    # Position of (chunk j, row r, column c) is j·size + r·_COLUMNS + c + 1.
    row_weights = torch.arange(rows, dtype=torch.int64, device=device).mul_(_COLUMNS)
    column_weights = torch.arange(1, _COLUMNS + 1, dtype=torch.int64, device=device)
    plain = rows_total.sum()
    weighted = (
        rows_total.mul(row_weights).sum()
        + columns_total.mul(column_weights).sum()
        + by_chunk.mul(size)
    )
    return torch.stack([plain, weighted])


def fingerprint_ints(
    tensor: torch.Tensor, *, chunk_elements: int = DEFAULT_CHUNK_ELEMENTS
) -> tuple[int, int]:
    """`(plain, weighted)` as signed 64-bit Python ints."""
    plain, weighted = fingerprint(tensor, chunk_elements=chunk_elements).tolist()
    return int(plain), int(weighted)


def fingerprints(
    tensors: Iterable[torch.Tensor | None],
    *,
    device: torch.device | None = None,
    chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
) -> torch.Tensor:
    """One `[plain, weighted]` row per tensor, shape (count, 2), int64, on `device` (None: the
    tensors'); None counts as empty (an unused parameter's missing gradient fingerprints like
    zeros: (0, 0)). Tensors all on one GPU take the fused kernel: a few launches for all of them."""
    tensors = list(tensors)
    present = [tensor for tensor in tensors if tensor is not None]
    home = present[0].device if present else None
    if home is not None and fused.available(home) and all(t.device == home for t in present):
        empty = torch.empty(0, dtype=torch.int8, device=home)
        words = [empty if tensor is None else raw_words(tensor) for tensor in tensors]
        return fused.fingerprints(words, home).to(device or home)
    rows: list[torch.Tensor] = []
    for tensor in tensors:
        if tensor is None:
            rows.append(torch.zeros(2, dtype=torch.int64, device=device))
        else:
            rows.append(fingerprint(tensor, chunk_elements=chunk_elements).to(device))
    if not rows:
        return torch.zeros((0, 2), dtype=torch.int64, device=device)
    return torch.stack(rows)


def weights_fingerprint(
    tensors: Iterable[torch.Tensor | None], *, chunk_elements: int = DEFAULT_CHUNK_ELEMENTS
) -> str:
    """One digest of this copy of the weights, for a checkpoint's manifest: `sha256:` and the
    hex SHA-256 of the tensors' fingerprints (`fingerprints`, in order, as little-endian int64).
    Equal on every replica that agrees; a load that reproduces the saved weights reproduces it."""
    rows = fingerprints(tensors, device=torch.device("cpu"), chunk_elements=chunk_elements)
    data = b"".join(int(v).to_bytes(8, "little", signed=True) for v in rows.reshape(-1).tolist())
    return "sha256:" + hashlib.sha256(data).hexdigest()
