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

How the sums are computed. The words run chunk by chunk through one reused buffer: each chunk is
copied into it widened (to int64; 1- and 2-byte words, |x| < 2^15, only to int32, where every
partial sum below stays under 2^31), then summed along the rows and along the columns of a
(rows, 64) view. Position j·size + r·64 + c + 1 (chunk j, row r, column c) makes

    weighted = Σ_j j·size·(sum of chunk j) + Σ_r 64·r·(sum of row r) + Σ_c (c+1)·(sum of column c)

(rows and columns summed over all chunks), so no position vector is built and each chunk is read twice from cache after one widening
copy. Int64 (and bounded int32) sums are exact mod 2^64 in any order, so the result does not
depend on the chunk size or the device.

Temporary memory is bounded whatever the tensor's size: the buffer (8 bytes per word of
`chunk_elements`, 2 MiB by default; 4 bytes for 1- and 2-byte words), plus three int64 vectors of
chunk_elements / 64 row totals (96 KiB by default) and a few of 64.

Measured alternatives that were slower on a CPU, all exact: widening the whole tensor at once and
multiplying by a position vector (about 30 times slower); summing the words wrapped in int32 and
recovering the carries from exact sums of their top bits (one more elementwise pass and two more
reductions: as slow as widening); matmul with float64 or int8 weights (the BLAS paths for two
weight columns are slower than two plain sums); sums with a `dtype` argument (not vectorised for
integer widening). A (rows, 64) view sums faster than (rows, 256) for int64 columns.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from trainer_emitter.checks import fused

DEFAULT_CHUNK_ELEMENTS = 1 << 18
"""Integers per chunk: the int64 buffer is 8 times this many bytes (2 MiB)."""

_COLUMNS = 64
_NARROW_ROWS = 1 << 15
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
    `fingerprint_ints` gives Python ints."""
    if chunk_elements < _COLUMNS:
        raise ValueError(f"chunk_elements must be at least {_COLUMNS}, not {chunk_elements}")
    words = raw_words(tensor)
    device = words.device
    if fused.available(device):
        return fused.fingerprints([words], device)[0]
    total = words.numel()
    if total == 0:
        return torch.zeros(2, dtype=torch.int64, device=device)
    # 1- and 2-byte integers (|x| < 2^15) sum exactly in int32 within a chunk: a row of 64 is
    # under 2^21 and a column of at most 2^15 rows under 2^30. Half the bytes to move per chunk.
    narrow = words.element_size() <= 2
    limit = min(chunk_elements, _NARROW_ROWS * _COLUMNS) if narrow else chunk_elements
    rows = max(1, min(limit, total + _COLUMNS - 1) // _COLUMNS)
    size = rows * _COLUMNS
    work = torch.int32 if narrow else torch.int64
    buffer = torch.empty(size, dtype=work, device=device)
    matrix = buffer.view(rows, _COLUMNS)
    row_sums = torch.empty(rows, dtype=work, device=device)
    column_sums = torch.empty(_COLUMNS, dtype=work, device=device)
    rows_total = torch.zeros(rows, dtype=torch.int64, device=device)
    columns_total = torch.zeros(_COLUMNS, dtype=torch.int64, device=device)
    rows_by_chunk = torch.zeros(rows, dtype=torch.int64, device=device)
    for chunk, start in enumerate(range(0, total, size)):
        piece = words[start : start + size]
        count = piece.numel()
        if count < size:  # the tail: zeros add nothing to either sum
            buffer[count:].zero_()
        buffer[:count].copy_(piece)
        torch.sum(matrix, 1, dtype=work, out=row_sums)
        torch.sum(matrix, 0, dtype=work, out=column_sums)
        rows_total.add_(row_sums)
        columns_total.add_(column_sums)
        if chunk:
            rows_by_chunk.add_(row_sums, alpha=chunk)
    # Position of (chunk j, row r, column c) is j·size + r·_COLUMNS + c + 1.
    row_weights = torch.arange(rows, dtype=torch.int64, device=device).mul_(_COLUMNS)
    column_weights = torch.arange(1, _COLUMNS + 1, dtype=torch.int64, device=device)
    plain = rows_total.sum()
    weighted = (
        rows_total.mul(row_weights).sum()
        + columns_total.mul(column_weights).sum()
        + rows_by_chunk.sum().mul(size)
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
