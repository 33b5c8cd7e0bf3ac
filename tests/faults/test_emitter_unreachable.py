"""The emitter side: with AWS unreachable, no report is lost. Every report is spooled whole,
and a replay delivers every one, once (trainer_emitter's public API only)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.conftest import load_fixture
from tests.faults.figures import record
from trainer_emitter import AwsSink, Emitter, MemorySink
from trainer_emitter import spool as spool_module

REPORTS = 50


def unreachable_endpoint() -> str:
    """A local port nothing listens on: every connection is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def emitter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Emitter:
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-west-2",
    }.items():
        monkeypatch.setenv(key, value)
    sink = AwsSink(
        region="us-west-2",
        endpoint_url=unreachable_endpoint(),
        connect_timeout=0.2,
        read_timeout=0.2,
        max_attempts=1,
    )
    return Emitter(
        cluster_name="ml-cluster-1",
        job_name="llama-pretrain",
        region="us-west-2",
        rank=0,
        rank_map=load_fixture("alarms", "rank_map"),
        sink=sink,
        spool_dir=tmp_path,
        deadline=2.0,
    )


def test_with_aws_unreachable_fifty_reports_are_all_spooled_and_all_replayable(emitter, tmp_path):
    alarm = load_fixture("alarms", "replay_culprit")

    results = [emitter.report(alarm) for _ in range(REPORTS)]

    assert [r.lost for r in results] == [False] * REPORTS
    assert all(r.spooled and not r.delivered for r in results)
    replayed = MemorySink()
    replay = spool_module.replay([tmp_path], replayed)
    report_ids = {r.report_id for r in results}
    assert replay.ok
    assert set(replay.delivered) == report_ids and len(replay.delivered) == REPORTS
    assert {e["report_id"] for e in replayed.events} == report_ids
    assert len(replayed.metrics) == sum(len(r.datapoints) for r in results)
    assert spool_module.replay([tmp_path], MemorySink()).delivered == []  # sent once
    record("emitter, AWS unreachable", "reports", REPORTS)
    record("emitter, AWS unreachable", "spooled", sum(r.spooled for r in results))
    record("emitter, AWS unreachable", "lost", sum(r.lost for r in results))
    record("emitter, AWS unreachable", "replayed", len(replay.delivered))
