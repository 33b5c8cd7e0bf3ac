"""The drill's DDP job: a real 4-rank gloo job whose alarm and rank map are what `report()` takes.

The fault goes on rank 3 here, not on the drill's default rank, so the culprit follows the
injection."""

from __future__ import annotations

from datetime import UTC, datetime

import jsonschema
import pytest

from sdc_remediation.infra.local.ddp_job import JobResult, run_job
from sdc_remediation.infra.local.drill.scenarios import CLUSTER, NODES
from trainer_emitter.contract import NAMESPACE, Metric, Role, report_schema
from trainer_emitter.mapping import Datapoint, build_report
from trainer_emitter.rankmap import RankMap

pytestmark = pytest.mark.torch

FAULT_RANK = 3
FAULT_STEP = 4
AUDIT_EVERY = 3
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.fixture(scope="module")
def job() -> JobResult:
    return run_job(NODES, fault_rank=FAULT_RANK, fault_step=FAULT_STEP, audit_every=AUDIT_EVERY)


def test_the_rank_map_puts_each_rank_on_one_instance_of_the_drill_cluster(job):
    assert [(e["rank"], e["node_name"], e["instance_id"]) for e in job.rank_map] == [
        (rank, f"hyperpod-{instance}", instance) for rank, instance in enumerate(NODES)
    ]


def test_the_first_audit_after_the_fault_names_the_faulty_rank_and_no_earlier_check_fired(job):
    assert job.alarm["step"] == 6  # audits at 3 (before the fault: passes) and 6
    assert job.alarm["check"] == "compute"
    assert job.alarm["nonfinite"] == []  # x1000 is finite: check 1 passes
    assert job.alarm["mismatched_pairs"] == [[0, 3], [3, 2]]  # its replay of rank 0, its own batch
    assert job.alarm["culprits"] == [FAULT_RANK]
    assert job.alarm["last_audit_pass"] == 3
    assert job.fired == [4, 5, 6]
    assert [s["applied"] for s in job.steps] == [True] * 5 + [False]


def test_the_alarm_builds_a_report_without_errors_that_names_the_faulty_rank_s_instance(job):
    report = build_report(
        job.alarm,
        RankMap(job.rank_map),
        cluster_name=CLUSTER,
        job_name="ddp-drill",
        namespace=NAMESPACE,
        report_id="00000000-0000-4000-8000-000000000000",
        now=NOW,
        reporting_rank=0,
    )

    assert report.errors == []
    assert report.datapoints == [Datapoint(Metric.REPLAY_MISMATCH, CLUSTER, NODES[FAULT_RANK], NOW)]
    (suspect,) = report.detail["suspects"]
    assert (suspect["rank"], suspect["role"], suspect["instance_id"]) == (
        FAULT_RANK,
        Role.CULPRIT.value,
        NODES[FAULT_RANK],
    )
    assert report.detail["ambiguous"] is False
    jsonschema.Draft202012Validator(
        report_schema(), format_checker=jsonschema.FormatChecker()
    ).validate(report.detail)


def test_the_timeline_lines_say_where_the_fault_went_and_whom_the_audit_named(job):
    lines = job.lines()

    assert lines[0][1] == {"fault_rank": "3", "fault_step": "4"}
    assert "fault injected on rank 3 at step 4" in lines[0][0]
    assert lines[-1] == (
        "audit at step 6 named rank 3 (mismatched pairs [0, 3], [3, 2]); step 6 not applied",
        {"step": "6", "culprits": "3"},
    )
