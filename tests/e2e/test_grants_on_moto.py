"""Grants proven sufficient: every AWS call a function makes on moto is checked against its
role in the synthesized template (every LocalRun does it when it ends); here, on the template
with clusters, node isolation, node-label recovery and telemetry, and proof that the check
fails when a needed action is taken away."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from sdc_remediation.infra.local.drill.scenarios import NODES as DRILL_NODES
from sdc_remediation.infra.local.drill.scenarios import (
    SWEEP_CONTEXT,
    SWEEP_FAILS,
    TELEMETRY_CONTEXT,
    WORKSPACE_ID,
)
from sdc_remediation.infra.local.grants import Denial
from sdc_remediation.infra.local.routing import new_event
from sdc_remediation.infra.local.run import ACCOUNT, CLUSTER, REGION, LocalRun, default_cluster
from sdc_remediation.lambdas.logic.opening.proceeding import proceed_id
from sdc_remediation.lambdas.models.hyperpod import HealthCheck
from sdc_remediation.lambdas.models.incident import IncidentState
from tests.e2e.test_pipeline_on_moto import CULPRIT_INSTANCE, open_from_fixture
from tests.e2e.test_stuck_on_moto import wait_until
from tests.unit.reports import NODES, forged_event
from trainer_emitter.contract import REPORT_DETAIL_TYPE, REPORT_SOURCE

pytestmark = [pytest.mark.slow, pytest.mark.synth]

FULL_CONTEXT = {**TELEMETRY_CONTEXT, "sdc:recoveryThroughNodeLabel": [CLUSTER]}
"""Clusters and node isolation (the local run's own), node-label recovery and telemetry."""


@pytest.fixture(scope="module")
def full_run() -> LocalRun:
    """Two incidents on the full template: one replaced (through HyperPod's node label: the
    cluster's NodeRecovery is Automatic), one rejected; and a reconciliation."""
    hyperpod = default_cluster(node_recovery="Automatic")
    with LocalRun.open(
        context=FULL_CONTEXT,
        hyperpod=hyperpod,
        # nothing listens there: the telemetry query fails fast, the card says so
        telemetry_endpoints={WORKSPACE_ID: "http://127.0.0.1:9"},
    ) as run:
        replaced = open_from_fixture(run)
        run.wait_for(replaced, "awaiting_approval")
        run.decide(replaced, "approve", "culprit twice")
        handed_over = wait_until(
            lambda: (
                (run.incident(replaced).replacement or None)
                and run.incident(replaced).replacement.path == "node_label"
            )
        )
        hyperpod.replace_nodes(CLUSTER, [CULPRIT_INSTANCE])  # HyperPod acting on its label
        run.wait_for(replaced, "replaced", timeout=90)
        rejected = open_from_fixture(run, "i-0cc00000000000003")
        run.wait_for(rejected, "awaiting_approval")
        run.decide(rejected, "reject", "not the GPU")
        run.wait_for(rejected, "rejected")
        run.reconcile()
    assert handed_over
    return run  # the grant check ran as the run ended: it did not raise


def without(template: dict[str, Any], function: str, action: str) -> dict[str, Any]:
    """`template` with `action` taken out of every policy statement of `function`'s role."""
    changed = copy.deepcopy(template)
    resources = changed["Resources"]
    (role,) = [
        r["Properties"]["Role"]["Fn::GetAtt"][0]
        for r in resources.values()
        if r["Type"] == "AWS::Lambda::Function"
        and r["Properties"]["Handler"] == f"sdc_remediation.lambdas.handlers.{function}.handler"
    ]
    for resource in resources.values():
        if resource["Type"] != "AWS::IAM::Policy":
            continue
        if {"Ref": role} not in resource["Properties"]["Roles"]:
            continue
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
            listed = statement["Action"]
            kept = [a for a in (listed if isinstance(listed, list) else [listed]) if a != action]
            statement["Action"] = kept or ["none:NothingAtAll"]
    return changed


def test_every_call_of_the_full_template_run_is_allowed_by_the_functions_roles(full_run):
    assert full_run.recorder.calls
    assert full_run.grant_denials() == []


def test_the_node_label_path_asked_eks_itself_and_the_reconciliation_ran(full_run):
    made = {(c.function, c.service, c.operation) for c in full_run.recorder.calls}

    assert ("replace_node", "eks", "DescribeCluster") in made  # the label path's EKS access
    assert ("reconcile", "dynamodb", "Query") in made


@pytest.mark.parametrize(
    ("function", "action"),
    [
        ("open_incident", "states:StartExecution"),
        ("open_incident", "sagemaker:DescribeClusterNode"),
        ("isolate_node", "eks:DescribeCluster"),
        ("start_health_check", "sagemaker:StartClusterHealthCheck"),
        ("request_approval", "sns:Publish"),
        ("request_approval", "kms:GenerateDataKey"),
        ("replace_node", "eks:DescribeCluster"),
        ("decide", "states:SendTaskSuccess"),
        ("close_incident", "dynamodb:DeleteItem"),
        ("reconcile", "dynamodb:Query"),
    ],
)
def test_taking_a_needed_action_away_fails_the_check_naming_function_action_and_resource(
    full_run, function, action
):
    weaker = without(full_run.stack.template, function, action)

    denied = full_run.grant_denials(weaker)

    assert denied, f"{function} without {action} still passed"
    assert {(d.function, d.action) for d in denied} == {(function, action)}
    assert all(isinstance(d, Denial) and d.resource.startswith("arn:aws:") for d in denied)
    assert f"{function}: {action} on arn:aws:" in str(denied[0])


def test_without_node_isolation_every_call_is_allowed_and_nobody_asks_eks():
    with LocalRun.open(context={"sdc:nodeIsolation": {}}) as run:
        incident_id = open_from_fixture(run)
        run.wait_for(incident_id, "awaiting_approval")
        run.decide(incident_id, "reject", "not the GPU")
        run.wait_for(incident_id, "rejected")
        calls = list(run.recorder.calls)
        denied = run.grant_denials()

    assert calls and denied == []
    assert not [c for c in calls if c.service == "eks"]


def test_a_held_job_that_proceeds_makes_only_calls_the_decide_role_allows():
    """`proceed` (the approval state machine's decide function) re-checks the held job's nodes
    with HyperPod, reads the pause switch and starts the remediation of the incident it opens."""
    with LocalRun.open() as run:  # 4 nodes: the guard allows 1 at once
        run.put_event(
            new_event(
                REPORT_DETAIL_TYPE,
                REPORT_SOURCE,
                forged_event(list(NODES[:2]), at=datetime.now(UTC))["detail"],
                region=REGION,
                account=ACCOUNT,
            )
        )
        (held,) = run.deps.incidents.in_state(IncidentState.HELD)
        execution = run.decide(held.incident_id, "proceed", "genuine: check both")
        opened = run.incident(proceed_id(held))
        calls = list(run.recorder.calls)
        denied = run.grant_denials()

    assert execution["status"] == "SUCCEEDED"
    assert opened is not None and opened.execution_arn
    made = {(c.function, c.service, c.operation) for c in calls}
    assert ("decide", "states", "StartExecution") in made
    assert ("decide", "sagemaker", "DescribeClusterNode") in made
    assert denied == []


@pytest.fixture(scope="module")
def sweep_run() -> LocalRun:
    """The idle sweep on eight EKS nodes, one failing InstanceConnectivity: a run that starts
    checks, one that reads them and opens the failed node's incident."""
    hyperpod = default_cluster((*NODES_OF_SWEEP,))
    hyperpod.fail_check(CLUSTER, SWEEP_FAILS, HealthCheck.INSTANCE_CONNECTIVITY)
    with LocalRun.open(context=SWEEP_CONTEXT, hyperpod=hyperpod) as run:
        run.sweep()
        hyperpod.advance(hyperpod.health_check_polls + 1)
        record = run.sweep()
        (failed,) = [r for r in record["results"] if not r["passed"]]
        run.wait_for(failed["incident_id"], "awaiting_approval")
    return run  # the grant check ran as the run ended: it did not raise


NODES_OF_SWEEP = (*DRILL_NODES, *(f"i-0ee{n:014x}" for n in range(1, 5)))


def test_the_sweeps_calls_are_allowed_by_its_role_scoped_to_the_swept_cluster(sweep_run):
    made = {(c.function, c.service, c.operation) for c in sweep_run.recorder.calls}

    assert ("sweep_idle", "sagemaker", "ListClusterNodes") in made
    assert ("sweep_idle", "sagemaker", "StartClusterHealthCheck") in made
    assert ("sweep_idle", "states", "StartExecution") in made  # the failed check's incident
    assert sweep_run.grant_denials() == []


@pytest.mark.parametrize(
    "action",
    [
        "sagemaker:ListClusterNodes",
        "sagemaker:StartClusterHealthCheck",
        "sagemaker:DescribeClusterNode",
        "states:StartExecution",
    ],
)
def test_taking_an_action_the_sweep_needs_away_fails_the_check(sweep_run, action):
    denied = sweep_run.grant_denials(without(sweep_run.stack.template, "sweep_idle", action))

    assert {(d.function, d.action) for d in denied} == {("sweep_idle", action)}
