from __future__ import annotations

from typing import Any

import pytest

from tests.torch.harness import run_group
from tests.torch.scenarios import SCENARIOS


def pytest_configure(config: pytest.Config) -> None:
    # torch warns once at import when numpy is absent; numpy is no dependency of this project.
    config.addinivalue_line("filterwarnings", "ignore:Failed to initialize NumPy:UserWarning")


@pytest.fixture(scope="session")
def runs() -> dict[str, list[Any]]:
    """Every scenario, run once in one 4-rank gloo group: `{scenario: [result per rank]}`."""
    return run_group(list(SCENARIOS))
