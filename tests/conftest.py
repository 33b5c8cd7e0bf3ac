from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
EVENTS = Path(__file__).resolve().parent / "events"
"""The project's own fixtures (sources in `tests/events/README.md`): AWS event shapes at the top,
the training-loop alarm dicts and their rank map under `alarms/`."""
FIXTURE_DIRS = {"events": EVENTS, "alarms": EVENTS / "alarms"}


def fixture_path(kind: str, name: str) -> Path:
    """The file of fixture `name` of `kind` ("events" or "alarms"); it must exist."""
    if kind not in FIXTURE_DIRS:
        raise KeyError(f"no fixture kind {kind!r}: one of {sorted(FIXTURE_DIRS)}")
    path = FIXTURE_DIRS[kind] / f"{name}.json"
    if not path.is_file():
        raise FileNotFoundError(f"no fixture {kind}/{name}.json in {FIXTURE_DIRS[kind]}")
    return path


def load_fixture(kind: str, name: str) -> Any:
    """Load fixture `name` of `kind` as JSON (a fresh copy each call)."""
    return json.loads(fixture_path(kind, name).read_text())


@pytest.fixture
def fixture():
    return load_fixture
