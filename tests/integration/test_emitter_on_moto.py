"""The emitter against an AWS account (moto) and against endpoints that do not answer."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import jsonschema
import pytest
from moto import mock_aws

from tests.conftest import load_fixture
from trainer_emitter import Emitter
from trainer_emitter.contract import REPORT_DETAIL_TYPE, REPORT_SOURCE, report_schema
from trainer_emitter.sinks import AwsSink
from trainer_emitter.spool import replay

REGION = "us-west-2"
DEADLINE = 1.0
BOUND = 4.0
"""Return time / deadline that still tells "returns at the deadline" from "waits out the
retries" (three attempts per call, two calls). The goal figure (<= 1.1) is measured by
`make bench` (emitter), not asserted here, where a loaded machine delays a thread's wake-up."""


pytestmark = pytest.mark.usefixtures("fake_aws_credentials")


@pytest.fixture
def account() -> Iterator[dict]:
    """A moto account with a rule that copies every SDC Report event into a queue we can read."""
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        events = boto3.client("events", region_name=REGION)
        queue_url = sqs.create_queue(QueueName="reports")["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        events.put_rule(
            Name="sdc-reports",
            EventPattern=json.dumps(
                {"source": [REPORT_SOURCE], "detail-type": [REPORT_DETAIL_TYPE]}
            ),
        )
        events.put_targets(Rule="sdc-reports", Targets=[{"Id": "q", "Arn": queue_arn}])
        yield {
            "sqs": sqs,
            "queue_url": queue_url,
            "cloudwatch": boto3.client("cloudwatch", region_name=REGION),
        }


def delivered_events(account) -> list[dict]:
    messages = (
        account["sqs"]
        .receive_message(QueueUrl=account["queue_url"], MaxNumberOfMessages=10)
        .get("Messages", [])
    )
    return [json.loads(m["Body"]) for m in messages]


def published_metrics(account) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    metrics = account["cloudwatch"].list_metrics(Namespace="SDC/Training")["Metrics"]
    return {
        (m["MetricName"], tuple((d["Name"], d["Value"]) for d in m["Dimensions"])) for m in metrics
    }


def emitter(tmp_path: Path, **settings) -> Emitter:
    # Delivery tests get a roomy deadline (a cold client on a busy machine is slow); the tests
    # of the bound pass DEADLINE explicitly.
    settings.setdefault("deadline", 10.0)
    return Emitter(
        cluster_name="ml-cluster-1",
        job_name="llama-pretrain",
        region=REGION,
        rank=0,
        rank_map=load_fixture("alarms", "rank_map"),
        spool_dir=tmp_path,
        **settings,
    )


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def silent_server() -> Iterator[int]:
    """Accepts connections and never answers: the slowest way for an endpoint to fail."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(1)
    for conn in held:
        conn.close()
    server.close()


@pytest.mark.parametrize(
    ("alarm", "expected"),
    [
        ("replay_culprit", {("sdc_replay_mismatch", "i-0bb00000000000002")}),
        (
            "nonfinite_transient",
            {
                ("sdc_nonfinite_grad", "i-0bb00000000000002"),
                ("sdc_replay_mismatch", "i-0bb00000000000002"),
            },
        ),
        ("weights_suspect", {("sdc_divergent_tensors", "i-0aa00000000000001")}),
    ],
)
def test_a_fixture_alarm_lands_as_datapoints_and_one_valid_report_event(
    account, tmp_path, alarm, expected
):
    result = emitter(tmp_path).report(load_fixture("alarms", alarm))

    assert result.delivered, result.errors
    assert published_metrics(account) == {
        (metric, (("ClusterName", "ml-cluster-1"), ("InstanceId", instance)))
        for metric, instance in expected
    }
    (event,) = delivered_events(account)
    assert (event["source"], event["detail-type"]) == (REPORT_SOURCE, REPORT_DETAIL_TYPE)
    assert event["detail"]["report_id"] == result.report_id
    jsonschema.validate(event["detail"], report_schema())


def test_datapoints_have_value_one_and_unit_count(account, tmp_path):
    emitter(tmp_path).report(load_fixture("alarms", "weights_suspect"))

    stats = account["cloudwatch"].get_metric_statistics(
        Namespace="SDC/Training",
        MetricName="sdc_divergent_tensors",
        Dimensions=[
            {"Name": "ClusterName", "Value": "ml-cluster-1"},
            {"Name": "InstanceId", "Value": "i-0aa00000000000001"},
        ],
        StartTime=time.time() - 600,
        EndTime=time.time() + 60,
        Period=60,
        Statistics=["Maximum", "SampleCount"],
    )["Datapoints"]
    assert [(p["Maximum"], p["SampleCount"], p["Unit"]) for p in stats] == [(1.0, 1.0, "Count")]


def test_a_closed_port_returns_within_the_deadline_and_spools_the_complete_report(tmp_path):
    sender = emitter(tmp_path, endpoint_url=f"http://127.0.0.1:{closed_port()}", deadline=DEADLINE)

    result = sender.report(load_fixture("alarms", "replay_culprit"))

    assert result.elapsed <= DEADLINE * BOUND
    assert not result.delivered and result.spooled and not result.lost
    (line,) = result.spool_path.read_text().splitlines()
    record = json.loads(line)
    assert record["pending"] == ["metrics", "event"]
    assert record["report"] == result.detail
    assert [d["instance_id"] for d in record["datapoints"]] == ["i-0bb00000000000002"]


def test_an_endpoint_that_never_answers_cannot_hold_training_past_the_deadline(
    tmp_path, silent_server
):
    sender = emitter(tmp_path, endpoint_url=f"http://127.0.0.1:{silent_server}", deadline=DEADLINE)

    started = time.monotonic()
    result = sender.report(load_fixture("alarms", "weights_suspect"))
    waited = time.monotonic() - started

    assert waited <= DEADLINE * BOUND
    assert result.spooled
    assert any("deadline" in e or "failed" in e for e in result.errors)


def test_replaying_the_spool_against_the_account_delivers_each_report_once(account, tmp_path):
    offline = emitter(tmp_path, endpoint_url=f"http://127.0.0.1:{closed_port()}")
    first = offline.report(load_fixture("alarms", "replay_culprit"))
    second = offline.report(load_fixture("alarms", "weights_suspect"))

    outcome = replay([tmp_path], AwsSink(region=REGION))
    again = replay([tmp_path], AwsSink(region=REGION))

    assert sorted(outcome.delivered) == sorted([first.report_id, second.report_id])
    assert outcome.ok and again.delivered == []
    assert sorted(e["detail"]["report_id"] for e in delivered_events(account)) == sorted(
        [first.report_id, second.report_id]
    )
    assert published_metrics(account) == {
        (
            "sdc_replay_mismatch",
            (("ClusterName", "ml-cluster-1"), ("InstanceId", "i-0bb00000000000002")),
        ),
        (
            "sdc_divergent_tensors",
            (("ClusterName", "ml-cluster-1"), ("InstanceId", "i-0aa00000000000001")),
        ),
    }
    assert list(tmp_path.glob("*.jsonl")) == []


def test_a_replay_that_fails_again_keeps_the_record_for_next_time(tmp_path):
    offline = emitter(tmp_path, endpoint_url=f"http://127.0.0.1:{closed_port()}")
    result = offline.report(load_fixture("alarms", "replay_culprit"))

    outcome = replay(
        [tmp_path],
        AwsSink(region=REGION, endpoint_url=f"http://127.0.0.1:{closed_port()}", max_attempts=1),
    )

    assert outcome.still_pending == [result.report_id] and not outcome.ok
    assert json.loads(result.spool_path.read_text())["report"]["report_id"] == result.report_id


def test_an_unreadable_spool_line_is_set_aside_not_dropped(account, tmp_path):
    spool = tmp_path / "sdc-spool.rank0.1.jsonl"
    spool.write_text("{not json\n")

    outcome = replay([tmp_path], AwsSink(region=REGION))

    assert outcome.rejected_lines == 1
    assert (tmp_path / "sdc-spool.rank0.1.jsonl.rejected").read_text() == "{not json\n"
