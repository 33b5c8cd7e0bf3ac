"""The Triton kernel of `checks/fused.py` (imported by it on first use, only where Triton is
installed; `fused.py` says what it computes and why it is exact).

Triton reads `TRITON_INTERPRET` when it builds a kernel and its standard library (`tl.sum`), so
both must see the same value: the tests set it before Triton is first imported.
"""

import triton
import triton.language as tl

WORDS = {1: tl.int8, 2: tl.int16, 4: tl.int32}
"""The kernel's word type by width in bytes."""


@triton.jit
def partial_sums(addresses, lengths, partials, WORD: tl.constexpr, BLOCK: tl.constexpr):
    """Program (t, p) of a grid (tensors, P): the plain and weighted sums of blocks p, p + P, …
    of tensor t, into partials[t, p]."""
    tensor = tl.program_id(0)
    program = tl.program_id(1).to(tl.int64)
    programs = tl.num_programs(1).to(tl.int64)
    base = tl.load(addresses + tensor).to(tl.pointer_type(WORD), bitcast=True)
    count = tl.load(lengths + tensor)
    lanes = tl.arange(0, BLOCK).to(tl.int64)
    plain = tl.full([BLOCK], 0, tl.int64)
    running = tl.full([BLOCK], 0, tl.int64)
    first = program * BLOCK
    stride = programs * BLOCK
    for start in range(first, count, stride):
        index = start + lanes
        words = tl.load(base + index, mask=index < count, other=0)
        plain += words.to(tl.int64)
        running += plain
    iterations = tl.maximum(count - first + stride - 1, 0) // stride
    weighted = (first + lanes + 1) * plain + stride * (iterations * plain - running)
    out = partials + (tensor * programs + program) * 2
    tl.store(out, tl.sum(plain, axis=0))
    tl.store(out + 1, tl.sum(weighted, axis=0))
