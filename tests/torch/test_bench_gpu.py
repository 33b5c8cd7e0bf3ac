"""`make bench-gpu`'s parts, run where the tests run (on a GPU, or on CPU tensors with the
kernel under Triton's interpreter): what they compute and report, never how fast (figures are
the benchmark's, not the tests')."""

from __future__ import annotations

import pytest
import torch

from tests.bench import gpu
from trainer_emitter.checks import fused

pytestmark = pytest.mark.torch

DEVICE = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def test_without_a_cuda_device_the_script_says_so_and_measures_nothing(
    monkeypatch, capsys, tmp_path
):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)

    code = gpu.main(["--out", str(tmp_path / "out.json")])

    assert (code, "no CUDA device here" in capsys.readouterr().err) == (2, True)
    assert not (tmp_path / "out.json").exists()


def test_parity_finds_the_kernel_equal_to_the_definition_for_every_dtype():
    rows = gpu.parity(DEVICE, [0, 1, 65, 200])

    assert [(row["value"], row["failed"]) for row in rows] == [(0, False)] * 3


def test_parity_reports_a_kernel_that_computes_one_wrong_fingerprint(monkeypatch):
    real = fused.fingerprints

    def off_by_one(words, device, **options):
        rows = real(words, device, **options)
        rows[-1, 1] += 1
        return rows

    monkeypatch.setattr(fused, "fingerprints", off_by_one)

    rows = gpu.parity(DEVICE, [1, 65])

    assert [(row["value"] > 0, row["failed"]) for row in rows[:2]] == [(True, True)] * 2


def test_the_decoder_shapes_come_within_one_percent_of_953m_parameters():
    total = sum(gpu._numel(shape) for shape in gpu.decoder_shapes(953_000_000))

    assert abs(total - 953_000_000) / 953_000_000 < 0.01


def test_the_weight_check_part_reports_its_time_against_the_5_ms_goal():
    rows = gpu.weight_check(DEVICE, 200_000, width=64, vocab=512)

    timed = rows[1]
    assert timed["ratio"] == pytest.approx(timed["value"] / 0.005)


def test_the_throughput_part_compares_with_torch_sum_of_the_same_bytes():
    rows = gpu.throughput(DEVICE, 1 << 20)

    assert [row["ratio"] for row in rows if row["goal"] == "yardstick"] == [1.0]
