from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
# The documented AWS event shapes and training-loop alarm dicts, shared by the whole project.
SHARED_FIXTURES = REPO.parent / "shared" / "fixtures"
LOCAL_EVENTS = Path(__file__).resolve().parent / "events"


def load_fixture(kind: str, name: str) -> Any:
    """Load `<kind>/<name>.json`: our own `tests/events/` first, then the shared fixtures."""
    for root in (LOCAL_EVENTS, SHARED_FIXTURES / kind):
        path = root / f"{name}.json"
        if path.exists():
            return json.loads(path.read_text())
    raise FileNotFoundError(f"no fixture {kind}/{name}.json in {LOCAL_EVENTS} or {SHARED_FIXTURES}")


@pytest.fixture
def fixture():
    return load_fixture
