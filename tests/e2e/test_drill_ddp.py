"""`make drill ARGS=--ddp`: a real DDP job's alarm drives the whole pipeline to a replacement."""

from __future__ import annotations

import io
from itertools import pairwise

import pytest

from sdc_remediation.infra.local import ddp_job
from sdc_remediation.infra.local.drill.render import Style, render
from sdc_remediation.infra.local.drill.runner import Line, Outcome, run_scenario
from sdc_remediation.infra.local.drill.scenarios import CLUSTER, NODES, SCENARIOS
from tests.e2e.test_drill import UP_TO_REPLACEMENT

pytestmark = [pytest.mark.slow, pytest.mark.synth, pytest.mark.torch]

INJECTED = ddp_job.FAULT_RANK  # what the scenario's job injects; one rank per node
INJECTED_NODE = NODES[INJECTED]


@pytest.fixture(scope="module")
def outcome() -> Outcome:
    return run_scenario(SCENARIOS["ddp-replay"])


def training(outcome: Outcome) -> list[Line]:
    return [line for line in outcome.timeline if line.who == "training"]


def test_the_scenario_passes_with_one_replaced_incident_and_a_verified_audit_chain(outcome):
    assert outcome.passed, outcome.problems
    (incident,) = outcome.incidents
    assert incident["state"] == "replaced"
    assert outcome.chain_ok


def test_the_audit_of_the_job_names_the_rank_the_fault_was_injected_on(outcome):
    started, *_, audited = training(outcome)

    assert started.ids["fault_rank"] == str(INJECTED)
    assert audited.ids["culprits"] == str(INJECTED)
    assert f"named rank {INJECTED}" in audited.what


def test_the_report_and_the_incident_are_on_the_injected_rank_s_node(outcome):
    (published,) = [line for line in outcome.timeline if line.who == "rank 0"]
    (incident,) = outcome.incidents

    assert published.what.endswith(f"published (sdc_replay_mismatch on {INJECTED_NODE})")
    assert incident["instance_id"] == INJECTED_NODE
    assert incident["new_instance_id"] and incident["new_instance_id"] not in NODES


def test_the_fake_hyperpod_got_exactly_one_replace_call_for_that_node(outcome):
    assert outcome.replace_calls == [{"ClusterName": CLUSTER, "NodeIds": [INJECTED_NODE]}]


def test_the_audit_log_records_the_pipeline_steps_in_order_on_one_chain(outcome):
    (entries,) = outcome.audit.values()

    steps = [e["action"] for e in entries if e["action"] != "evidence_attached"]
    assert steps == [
        *UP_TO_REPLACEMENT,
        *["replacement_status"] * (len(steps) - len(UP_TO_REPLACEMENT) - 4),
        "replacement_done",
        "node_release_skipped",  # the node is gone: no cordon to lift
        "incident_closed",
        "closed_notified",
    ]
    assert [e["seq"] for e in entries] == list(range(1, len(entries) + 1))
    assert all(e["prev_hash"] == p["hash"] for p, e in pairwise(entries))


def test_the_printed_timeline_shows_the_training_before_the_pipeline(outcome):
    out = io.StringIO()

    render(outcome, out, Style(enabled=False))

    text = out.getvalue()
    assert text.index("training") < text.index("stack deployed") < text.index("approval requested")
    assert text.rstrip().splitlines()[-1].startswith("PASS  ddp-replay")
