"""The fused fingerprint kernel equals the definition, bit for bit.

On a GPU the kernel runs compiled on CUDA tensors; elsewhere under Triton's interpreter
(`TRITON_INTERPRET=1`, set by tests/torch/conftest.py) on CPU tensors. Sizes that cross many blocks
use small blocks and few programs, so every program loops and every tail is partial, without
making the interpreter read millions of words.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
import torch

from tests.torch.test_fingerprint import SUPPORTED_DTYPES, random_bits, reference
from trainer_emitter.checks import fingerprint as definition_module
from trainer_emitter.checks import fused
from trainer_emitter.checks.fingerprint import fingerprint_ints, fingerprints, raw_words

pytestmark = pytest.mark.torch

CUDA = torch.cuda.is_available()
DEVICE = torch.device("cuda") if CUDA else torch.device("cpu")
BIG = [(1 << 18) - 1, (1 << 18) + 1]


@pytest.fixture(autouse=True, scope="module")
def kernel() -> Iterator[None]:
    """The kernel as this machine runs it: compiled on a GPU, else interpreted (tests/torch's
    conftest sets TRITON_INTERPRET=1 before anything imports Triton); tables built afresh."""
    if sys.platform != "linux":
        pytest.skip("Triton ships for Linux only")
    assert fused._triton() is not None, "Triton is a test dependency: pip install -e '.[dev]'"
    assert CUDA or fused.interpreted(), "no GPU, and Triton does not interpret"
    fused._kept.clear()
    yield
    fused._kept.clear()


def kernel_ints(
    tensors: list[torch.Tensor], *, block: int = 64, programs: int = 3
) -> list[tuple[int, int]]:
    words = [raw_words(t.to(DEVICE)) for t in tensors]
    rows = fused.fingerprints(words, DEVICE, block=block, programs=programs).cpu().tolist()
    return [(int(plain), int(weighted)) for plain, weighted in rows]


@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES)
@pytest.mark.parametrize("count", [0, 1, 2, 63, 64, 65, 191, 193, 1001])
def test_the_kernel_equals_the_byte_level_reference_for_every_dtype_and_small_size(dtype, count):
    tensor = random_bits(dtype, count, seed=count * 17 + 3)

    assert kernel_ints([tensor]) == [reference(tensor)]


@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES)
@pytest.mark.parametrize("count", BIG)
def test_the_kernel_equals_the_definition_around_two_to_the_eighteen(dtype, count):
    tensor = random_bits(dtype, count, seed=count)

    got = kernel_ints([tensor], block=1024, programs=7)

    assert got == [fingerprint_ints(tensor)]


@pytest.mark.parametrize("block, programs", [(16, 1), (16, 5), (64, 1000), (1024, 2)])
def test_block_size_and_program_count_do_not_change_the_result(block, programs):
    tensor = random_bits(torch.float32, 3000 + 7, seed=5)

    assert kernel_ints([tensor], block=block, programs=programs) == [reference(tensor)]


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64])
@pytest.mark.parametrize("extreme", ["min", "max", "alternating"])
def test_words_at_the_extremes_lose_no_carry_in_the_kernel(dtype, extreme):
    # Every word at a bound drives every lane's running sums to theirs and makes them wrap.
    info = torch.iinfo(dtype)
    count = 4097
    tensor = torch.full((count,), info.max if extreme == "max" else info.min, dtype=dtype)
    if extreme == "alternating":
        tensor[1::2] = info.max

    assert kernel_ints([tensor], block=32, programs=4) == [reference(tensor)]


def test_many_tensors_of_every_width_fingerprint_in_one_call_as_each_alone():
    tensors = [
        random_bits(dtype, count, seed=i)
        for i, (dtype, count) in enumerate(
            [
                (torch.float32, 300),
                (torch.bfloat16, 77),
                (torch.bool, 65),
                (torch.float64, 0),
                (torch.float64, 129),
                (torch.int8, 1),
                (torch.float32, 5),
                (torch.int16, 64),
            ]
        )
    ]

    got = kernel_ints(tensors, block=32, programs=2)

    assert got == [reference(t) for t in tensors]


def test_a_second_call_on_the_same_tensors_reads_their_new_contents():
    # The kept address table must never keep a result: only where the words are.
    tensor = random_bits(torch.float32, 500, seed=2).to(DEVICE)
    first = kernel_ints([tensor])
    tensor.view(torch.int32)[499] ^= 1

    second = kernel_ints([tensor])

    assert first != second == [reference(tensor.cpu())]


def test_non_contiguous_views_fingerprint_through_the_kernel_like_their_contiguous_copies(
    monkeypatch,
):
    monkeypatch.setattr(fused, "available", lambda device: True)
    matrix = random_bits(torch.float16, 65 * 9, seed=4).reshape(65, 9).to(DEVICE)
    views = [matrix.t(), matrix[::2], matrix[:, 3], matrix.t()[1:, ::3]]

    got = [tuple(definition_module.fingerprint(view).cpu().tolist()) for view in views]

    assert got == [reference(view.contiguous().cpu()) for view in views]


def test_fingerprints_of_tensors_and_missing_gradients_take_the_kernel_as_one_batch(monkeypatch):
    calls: list[int] = []
    real = fused.fingerprints

    def counted(words, device, **options):
        calls.append(len(words))
        return real(words, device, block=32, programs=2)

    monkeypatch.setattr(fused, "available", lambda device: True)
    monkeypatch.setattr(fused, "fingerprints", counted)
    tensors = [random_bits(torch.float32, 100, seed=1), None, random_bits(torch.int8, 3, seed=2)]

    rows = fingerprints([None if t is None else t.to(DEVICE) for t in tensors]).cpu().tolist()

    assert (calls, rows) == (
        [3],
        [list(reference(tensors[0])), [0, 0], list(reference(tensors[2]))],
    )


def test_a_gpu_named_without_its_index_is_read_as_the_current_one(monkeypatch):
    # torch.device("cuda") != torch.device("cuda", 0), though both name the current GPU.
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    words = raw_words(torch.zeros(3))

    with pytest.raises(ValueError, match="tensor 0 is on cpu, not cuda:0"):
        fused.fingerprints([words], torch.device("cuda"))


def test_the_kernel_refuses_words_that_are_not_flat_raw_integers():
    with pytest.raises(TypeError, match="not flat raw words"):
        fused.fingerprints([torch.zeros(4, device=DEVICE)], DEVICE)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"block": 48}, "block must be a power of two"),
        ({"programs": 0}, "programs must be between 1 and 65535"),
        ({"programs": 65536}, "programs must be between 1 and 65535"),
    ],
)
def test_a_block_or_program_count_the_grid_cannot_take_is_refused(options, message):
    with pytest.raises(ValueError, match=message):
        fused.fingerprints([torch.zeros(4, dtype=torch.int32, device=DEVICE)], DEVICE, **options)


def test_without_triton_the_kernel_is_not_offered_and_says_what_is_missing(monkeypatch):
    monkeypatch.setattr(fused, "_triton", lambda: None)

    assert not fused.available(torch.device("cuda"))
    with pytest.raises(RuntimeError, match="needs Triton"):
        fused.fingerprints([], DEVICE)


def test_cpu_tensors_take_the_torch_path_unless_triton_interprets():
    assert not fused.available(torch.device("cpu"))
