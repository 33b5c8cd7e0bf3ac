from __future__ import annotations

import os
from typing import Any

import pytest
import torch

from tests.torch.harness import run_group
from tests.torch.scenarios import SCENARIOS

# Without a GPU the fused fingerprint kernel runs under Triton's interpreter, on CPU tensors. Triton
# reads the switch when it builds its standard library (on first import) and each kernel, so it is
# set here, before any test imports Triton; the checks themselves never run the kernel on CPU.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_configure(config: pytest.Config) -> None:
    # torch warns once at import when numpy is absent; numpy is no dependency of this project.
    config.addinivalue_line("filterwarnings", "ignore:Failed to initialize NumPy:UserWarning")


@pytest.fixture(scope="session")
def runs() -> dict[str, list[Any]]:
    """Every scenario, run once in one 4-rank gloo group: `{scenario: [result per rank]}`."""
    return run_group(list(SCENARIOS))
