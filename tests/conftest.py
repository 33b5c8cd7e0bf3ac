from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.faults import figures

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


SYNTH_FIXTURES = frozenset(
    {"lambda_asset", "synthesized", "variant_synthesized", "template", "variant_template", "tables"}
)
"""Fixtures that stand on a synthesized template: a test using one is marked `synth`."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks `synth` where a fixture needs the synthesized template (`make test-fast` leaves
    those out). With pytest-xdist's `--dist loadgroup` (`make test`), a module's tests run on
    one worker, so that what its module fixtures build (a drill scenario, a burst, the
    validators' verdict) is built once; modules sharing a session fixture name their group."""
    for item in items:
        if SYNTH_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.synth)
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))


def pytest_sessionfinish(session: pytest.Session) -> None:
    """On a pytest-xdist worker: hand the fault suite's figures to the controller."""
    worker_output = getattr(session.config, "workeroutput", None)
    if worker_output is not None:
        worker_output["fault_figures"] = {k: dict(v) for k, v in figures.FIGURES.items()}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """On the pytest-xdist controller: a worker is done; add its fault suite figures."""
    figures.merge(getattr(node, "workeroutput", {}).get("fault_figures", {}))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    lines = figures.summary()
    if lines:
        terminalreporter.section("fault suite figures")
        for line in lines:
            terminalreporter.write_line(line)
