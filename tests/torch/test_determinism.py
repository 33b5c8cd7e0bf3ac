from __future__ import annotations

import pytest
import torch

from trainer_emitter.checks.determinism import deterministic

pytestmark = pytest.mark.torch


def test_deterministic_kernels_are_on_inside_and_the_previous_settings_return_after():
    before = (torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.benchmark)
    torch.backends.cudnn.benchmark = True
    try:
        with deterministic():
            inside = (
                torch.are_deterministic_algorithms_enabled(),
                torch.backends.cudnn.deterministic,
                torch.backends.cudnn.benchmark,
            )
        after = (torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.benchmark)
    finally:
        torch.backends.cudnn.benchmark = before[1]

    assert inside == (True, True, False)
    assert after == (before[0], True)
