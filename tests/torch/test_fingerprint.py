"""Fingerprints: two int64 sums over the raw bits, and the changes they are proven to catch."""

from __future__ import annotations

import random
import sys

import pytest
import torch

from trainer_emitter.checks.fingerprint import fingerprint, fingerprint_ints, raw_words

pytestmark = pytest.mark.torch

PROVEN_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8]
INT_OF_SIZE = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
M64 = 1 << 64


def definition(tensor: torch.Tensor) -> tuple[int, int]:
    """The module docstring's definition, in Python integers: plain and weighted sums mod 2^64."""
    words = raw_words(tensor).tolist()
    plain = sum(words) % M64
    weighted = sum(position * word for position, word in enumerate(words, start=1)) % M64
    return _signed(plain), _signed(weighted)


def _signed(value: int) -> int:
    return value - M64 if value >= 1 << 63 else value


def sample(dtype: torch.dtype, count: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return (torch.randn(count, generator=generator) * 100).to(dtype)
    if dtype is torch.bool:
        return torch.rand(count, generator=generator) > 0.5
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max, (count,), generator=generator, dtype=dtype)


def with_bits(tensor: torch.Tensor, edits: dict[int, int]) -> torch.Tensor:
    """A copy of `tensor` whose element i has raw bits `edits[i]` (as a signed integer)."""
    changed = tensor.clone()
    bits = changed.view(INT_OF_SIZE[tensor.element_size()])
    for index, value in edits.items():
        bits[index] = value
    return changed


def bits_of(tensor: torch.Tensor, index: int) -> int:
    return int(tensor.view(INT_OF_SIZE[tensor.element_size()])[index])


def flip(value: int, bit: int, size: int) -> int:
    width = 8 * size
    unsigned = (value % (1 << width)) ^ (1 << bit)
    return unsigned - (1 << width) if unsigned >= 1 << (width - 1) else unsigned


def test_a_three_element_int8_tensor_fingerprints_to_its_plain_and_weighted_sums():
    tensor = torch.tensor([1, -2, 3], dtype=torch.int8)

    assert fingerprint_ints(tensor) == (1 - 2 + 3, 1 * 1 + 2 * -2 + 3 * 3)


@pytest.mark.parametrize(
    "dtype", [*PROVEN_DTYPES, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool]
)
@pytest.mark.parametrize("count", [0, 1, 255, 256, 257, 1000, 5000])
def test_the_chunked_sums_equal_the_definition_for_every_dtype_and_chunk_tail(dtype, count):
    tensor = sample(dtype, count, seed=count)

    got = fingerprint_ints(tensor, chunk_elements=512)

    assert got == definition(tensor)


def test_the_chunk_size_does_not_change_the_fingerprint():
    tensor = sample(torch.float32, 70_001)

    results = {fingerprint_ints(tensor, chunk_elements=size) for size in (256, 4096, 1 << 18)}

    assert len(results) == 1


def test_a_non_contiguous_tensor_fingerprints_like_its_contiguous_copy():
    tensor = sample(torch.float32, 60).reshape(6, 10).t()

    assert fingerprint_ints(tensor) == fingerprint_ints(tensor.contiguous())


def test_plus_and_minus_zero_fingerprint_differently():
    assert fingerprint_ints(torch.tensor([0.0])) != fingerprint_ints(torch.tensor([-0.0]))


def test_a_16_byte_dtype_is_refused():
    with pytest.raises(TypeError, match="16 bytes"):
        fingerprint(torch.zeros(2, dtype=torch.complex128))


@pytest.mark.parametrize("dtype", PROVEN_DTYPES)
def test_every_single_bit_flip_in_any_element_changes_the_fingerprint(dtype):
    tensor = sample(dtype, 97)
    size = tensor.element_size()
    before = fingerprint_ints(tensor)

    unchanged = [
        (index, bit)
        for index in (0, 1, 48, 95, 96)
        for bit in range(8 * size)
        if fingerprint_ints(with_bits(tensor, {index: flip(bits_of(tensor, index), bit, size)}))
        == before
    ]

    assert unchanged == []


@pytest.mark.parametrize("dtype", PROVEN_DTYPES)
def test_any_change_of_two_elements_changes_the_fingerprint(dtype):
    tensor = sample(dtype, 513)
    size = tensor.element_size()
    width = 8 * size
    rng = random.Random(7)
    before = fingerprint_ints(tensor)

    missed = []
    for _ in range(300):
        i, j = rng.sample(range(tensor.numel()), 2)
        new_i, new_j = (rng.randrange(-(1 << (width - 1)), 1 << (width - 1)) for _ in "ij")
        if new_i == bits_of(tensor, i) or new_j == bits_of(tensor, j):
            continue
        if fingerprint_ints(with_bits(tensor, {i: new_i, j: new_j})) == before:
            missed.append((i, j))

    assert missed == []


@pytest.mark.parametrize("dtype", PROVEN_DTYPES)
def test_two_flips_of_the_top_bit_in_opposite_directions_at_any_distance_are_caught(dtype):
    # The hardest case for two sums: the changes cancel in the plain sum, and each carries as many
    # factors of two as an element allows, at distances with as many factors of two as possible.
    size = torch.tensor([], dtype=dtype).element_size()
    word_bits = 8 * min(size, 4)
    count = (1 << 16) + 2
    base = torch.zeros(count, dtype=INT_OF_SIZE[size])
    top = word_bits - 1 if size < 8 else 63
    for distance in (1, 2, 4, 1 << 8, 1 << 16):
        tensor = base.clone()
        tensor[distance] = -(1 << top)  # top bit set; the flip clears it (+2^top) ...
        before = fingerprint_ints(tensor.view(dtype))
        changed = tensor.clone()
        changed[0] = -(1 << top)  # ... and sets it here (-2^top): the plain sum is unchanged
        changed[distance] = 0

        assert fingerprint_ints(changed.view(dtype)) != before, distance


def test_two_float64_sign_flips_at_an_even_distance_are_caught():
    # Read as whole int64 values these two flips would cancel in both sums (each adds 2^63).
    tensor = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    flipped = tensor.clone()
    flipped[0], flipped[2] = -flipped[0], -flipped[2]

    assert fingerprint_ints(flipped) != fingerprint_ints(tensor)


def test_a_fingerprint_stays_on_the_tensors_device_as_two_int64s():
    result = fingerprint(sample(torch.float32, 10))

    assert (result.dtype, tuple(result.shape), result.device.type) == (torch.int64, (2,), "cpu")


# Property-style checks against a reference that reads the tensor's bytes directly (it does not use
# `raw_words`), so a wrong view, a lost carry or a wrong position in the fast path shows up here.

SUPPORTED_DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.float16,
    torch.bfloat16,
    torch.int32,
    torch.float32,
    torch.int64,
    torch.float64,
    torch.complex64,
]


def reference(tensor: torch.Tensor) -> tuple[int, int]:
    """Plain and weighted sums of the raw words, decoded from the bytes with Python integers."""
    data = bytes(tensor.detach().contiguous().reshape(-1).view(torch.uint8).tolist())
    width = min(tensor.element_size(), 4)
    words = [
        int.from_bytes(data[at : at + width], sys.byteorder, signed=True)
        for at in range(0, len(data), width)
    ]
    plain = sum(words) % M64
    weighted = sum(position * word for position, word in enumerate(words, start=1)) % M64
    return _signed(plain), _signed(weighted)


def random_bits(dtype: torch.dtype, count: int, seed: int) -> torch.Tensor:
    """`count` elements of `dtype` with uniformly random bit patterns (sign bits, NaNs, anything)."""
    size = torch.tensor([], dtype=dtype).element_size()
    generator = torch.Generator().manual_seed(seed)
    raw = torch.randint(0, 256, (count * size,), generator=generator, dtype=torch.uint8)
    if dtype is torch.bool:
        return raw.remainder(2).view(torch.bool)
    return raw.view(dtype)


@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES)
@pytest.mark.parametrize("chunk_elements", [256, 1000, 1 << 18])
@pytest.mark.parametrize("count", [0, 1, 2, 63, 64, 65, 999, 1001, 2 * 4096 + 17])
def test_random_bit_patterns_fingerprint_to_the_byte_level_reference(dtype, chunk_elements, count):
    tensor = random_bits(dtype, count, seed=count * 31 + chunk_elements)

    got = fingerprint_ints(tensor, chunk_elements=chunk_elements)

    assert got == reference(tensor)


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64])
@pytest.mark.parametrize("extreme", ["min", "max", "alternating"])
def test_words_at_the_extremes_sum_without_losing_a_carry(dtype, extreme):
    # Every word at the most negative or most positive value drives every partial sum (rows,
    # columns, chunks) to its bound; alternating signs make the sums cancel and wrap.
    info = torch.iinfo(dtype)
    count = 3 * 4096 + 5
    if extreme == "min":
        tensor = torch.full((count,), info.min, dtype=dtype)
    elif extreme == "max":
        tensor = torch.full((count,), info.max, dtype=dtype)
    else:
        tensor = torch.full((count,), info.min, dtype=dtype)
        tensor[1::2] = info.max

    for chunk_elements in (256, 4096, 1 << 18):
        assert fingerprint_ints(tensor, chunk_elements=chunk_elements) == reference(tensor)


@pytest.mark.parametrize("dtype", [torch.int8, torch.int32, torch.int64])
@pytest.mark.parametrize("extreme", ["min", "alternating"])
def test_extreme_words_over_many_groups_of_chunks_fold_into_the_totals_exactly(dtype, extreme):
    # Chunks of one row, so 301 chunks make three groups of float64 partial sums; the running
    # sums reach their bound in each group before it is folded into the int64 totals.
    info = torch.iinfo(dtype)
    tensor = torch.full((64 * 300 + 7,), info.min, dtype=dtype)
    if extreme == "alternating":
        tensor[1::2] = info.max

    assert fingerprint_ints(tensor, chunk_elements=64) == reference(tensor)


def test_a_chunk_larger_than_exact_float64_sums_allow_is_refused():
    with pytest.raises(ValueError, match="chunk_elements must be between 64 and"):
        fingerprint(torch.zeros(4), chunk_elements=(1 << 26) + 1)


def test_the_reference_itself_sees_a_single_changed_byte():
    # Guards the guard: the reference must not be blind to the bits it is meant to check.
    tensor = random_bits(torch.float32, 101, seed=1)
    changed = tensor.clone()
    changed.view(torch.uint8)[203] ^= 0x80

    assert reference(changed) != reference(tensor)
