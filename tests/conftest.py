from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sdc_remediation.infra.local.moto_keys import remember_response_keys
from tests.faults import figures

remember_response_keys()  # every test that runs on moto answers faster, and the same

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


SHARED_WORKER = {
    "tests/torch/test_replicas.py": "tests/torch: the session's runs",
    "tests/torch/test_training.py": "tests/torch: the session's runs",
}
"""Modules that share a session fixture, and the name of the one worker they run on."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks `synth` where a fixture needs the synthesized template (`make test-fast` leaves
    those out)."""
    for item in items:
        if SYNTH_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.synth)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """pytest-xdist's `--dist loadscope` (`make test`), by module: a module's tests run on one
    worker, so that what its module fixtures build (a drill scenario, a burst, the validators'
    verdict) is built once; so do the modules of SHARED_WORKER, for their session fixture."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByModule(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return SHARED_WORKER.get(module, module)

    return ByModule(config, log)


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
