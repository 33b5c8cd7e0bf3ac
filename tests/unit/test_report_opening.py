"""Either channel opens: a report naming a culprit opens the incident before the alarm, an
ambiguous report opens one job-level incident, and alarms attach to what is open."""

from __future__ import annotations

import copy

from sdc_remediation.lambdas.logic import closing, health_check, intake
from sdc_remediation.lambdas.models.events import parse_contributor_event
from sdc_remediation.lambdas.models.incident import IncidentState
from sdc_remediation.lambdas.models.payloads import CloseRequest, IncidentRef, Outcome
from sdc_remediation.lambdas.models.report import parse_report_event
from tests.conftest import load_fixture
from tests.unit.reports import NODES, report_event
from tests.unit.world import CLUSTER, INSTANCE, World, alarm_event, room_for_a_job

S = IncidentState


def store(world: World, event: dict):
    return intake.store_report(parse_report_event(event), world.deps)


def alarm_on(world: World, instance_id: str, event_id: str = "alarm-1"):
    event = copy.deepcopy(alarm_event())
    event["id"] = event_id
    event["detail"]["alarmContributor"]["attributes"]["InstanceId"] = instance_id
    return intake.open_incident(parse_contributor_event(event), world.deps)


def test_a_report_naming_a_culprit_opens_its_incident_before_any_alarm(job_world):
    result = store(job_world, report_event("replay_culprit"))

    (opened,) = result["incidents"]
    assert opened["action"] == "opened"
    incident = job_world.incident(opened["incident_id"])
    assert (incident.instance_id, incident.state) == (NODES[1], S.OPENED)
    assert list(job_world.workflow.executions) == [opened["incident_id"]]
    assert job_world.audit.entries(opened["incident_id"])[0].details["source"] == "report"


def test_the_alarm_after_the_report_attaches_to_the_incident_the_report_opened(job_world):
    opened = store(job_world, report_event("replay_culprit"))["incidents"][0]

    result = alarm_on(job_world, NODES[1])

    assert result == {"incident_id": opened["incident_id"], "action": "attached"}
    assert len(job_world.workflow.executions) == 1
    assert job_world.incident(opened["incident_id"]).metrics == ["sdc_replay_mismatch"]


def test_a_confirmed_suspect_opens_its_incident_too(job_world):
    result = store(job_world, report_event("nonfinite_transient"))

    assert [r["action"] for r in result["incidents"]] == ["opened"]


def test_the_same_report_delivered_again_opens_nothing_more(job_world):
    event = report_event("replay_culprit")
    first = store(job_world, event)

    again = store(job_world, event)

    assert again["incidents"][0]["incident_id"] == first["incidents"][0]["incident_id"]
    assert len(job_world.store.incidents) == 1


def test_a_report_with_only_involved_ranks_that_is_not_ambiguous_opens_nothing(job_world):
    alarm = {
        "step": 30,
        "check": "compute",
        "nonfinite": [],
        "mismatched_pairs": [[13, 5], [21, 13]],
        "culprits": [13],
        "verdicts": [{"pair": [2, 9], "third": 17, "suspect": None, "kind": "unattributable"}],
        "suspect_window": [21, 30],
    }

    result = store(job_world, report_event(alarm))

    opened = [job_world.incident(r["incident_id"]).instance_id for r in result["incidents"]]
    assert opened == [NODES[1]]  # only the culprit's node; the unattributable pair waits


# -- ambiguous reports: one job-level incident ----------------------------------------------------


def test_an_ambiguous_report_opens_one_job_level_incident_for_the_involved_nodes(job_world):
    result = store(job_world, report_event("weights_no_majority"))

    (opened,) = result["incidents"]
    incident = job_world.incident(opened["incident_id"])
    assert (incident.scope, incident.state) == ("job", S.OPENED)
    assert incident.instance_ids == list(NODES)
    assert incident.job_name == "llama-pretrain"
    assert "-job-" in incident.incident_id
    assert job_world.workflow.executions[incident.incident_id]["scope"] == "job"


def test_the_involved_nodes_alarms_attach_to_the_job_level_incident(job_world):
    opened = store(job_world, report_event("weights_no_majority"))["incidents"][0]

    results = [alarm_on(job_world, node, f"alarm-{n}") for n, node in enumerate(NODES)]

    assert {r["incident_id"] for r in results} == {opened["incident_id"]}
    assert {r["action"] for r in results} == {"attached"}
    assert len(job_world.store.incidents) == 1


def test_a_node_with_an_open_incident_stays_with_it_and_gets_the_report_attached(job_world):
    job_world.settings = room_for_a_job(5)
    earlier = alarm_on(job_world, NODES[0])["incident_id"]

    result = store(job_world, report_event("weights_no_majority"))

    actions = {r["incident_id"]: r["action"] for r in result["incidents"]}
    assert actions[earlier] == "attached"
    job_id = next(i for i, a in actions.items() if a == "opened")
    assert job_world.incident(job_id).instance_ids == list(NODES[1:])


def test_the_job_level_incident_health_checks_every_involved_node_in_one_call(job_world):
    incident_id = store(job_world, report_event("reduced_gradient"))["incidents"][0]["incident_id"]

    result = health_check.start_health_check(IncidentRef(incident_id), job_world.deps)

    assert (result["started"], result["scope"]) == (True, "job")
    (call,) = job_world.hyperpod.calls_to("StartClusterHealthCheck")
    (config,) = call["DeepHealthCheckConfigurations"]
    assert config["InstanceIds"] == list(NODES)


def test_the_job_level_incident_polls_all_nodes_and_closes_as_checked(job_world):
    job_world.hyperpod.set_health_check_result(CLUSTER, NODES[2], passes=False)
    incident_id = store(job_world, report_event("weights_no_majority"))["incidents"][0][
        "incident_id"
    ]
    job_world.health_checked(incident_id)

    closed = closing.close_incident(
        CloseRequest(incident_id, Outcome.CHECKED, None), job_world.deps
    )

    assert closed["state"] == "checked"
    nodes = job_world.incident(incident_id).health_check.nodes
    assert {n: v.result for n, v in nodes.items()} == {
        NODES[0]: "passed",
        NODES[1]: "passed",
        NODES[2]: "failed",
        NODES[3]: "passed",
    }
    notice = job_world.notifier.published[-1]
    assert f"{NODES[2]}: FAILED" in notice.message
    assert "no replacement is proposed" in notice.message


def test_closing_the_job_level_incident_frees_every_involved_node(job_world):
    incident_id = store(job_world, report_event("weights_no_majority"))["incidents"][0][
        "incident_id"
    ]

    closing.close_incident(CloseRequest(incident_id, Outcome.FAILED, None), job_world.deps)

    assert all(job_world.store.open_incident_id(CLUSTER, node) is None for node in NODES)
    assert job_world.store.guard_state(CLUSTER).open_ids == ()


def test_a_job_level_incident_whose_nodes_do_not_fit_beside_the_open_ones_is_held(job_world):
    alarm_on(job_world, INSTANCE)  # one node taken of the guard's four

    result = store(job_world, report_event("weights_no_majority"))  # four more nodes

    (held,) = [r for r in result["incidents"] if r["action"] == "held"]
    incident = job_world.incident(held["incident_id"])
    assert incident.hold.kind == "guard"
    assert "this one needs 4" in incident.hold.reason
    assert job_world.store.guard_state(CLUSTER).open_nodes == 1


def test_a_job_level_incident_takes_one_guard_slot_per_node(job_world):
    result = store(job_world, report_event("weights_no_majority"))

    state = job_world.store.guard_state(CLUSTER)
    assert state.open_ids == (result["incidents"][0]["incident_id"],)
    assert state.open_nodes == 4


def test_a_node_alarm_beside_a_job_that_fills_the_guard_is_held(job_world):
    store(job_world, report_event("weights_no_majority"))  # four nodes of the guard's four

    result = alarm_on(job_world, INSTANCE)

    assert result["action"] == "held"
    assert job_world.incident(result["incident_id"]).hold.kind == "guard"


def test_the_job_level_close_notice_names_the_checkpoint_to_resume_from(job_world):
    alarm = {
        **load_fixture("alarms", "weights_no_majority"),  # window [31, 40], passes at 30
        "checkpoints": [
            {"step": s, "last_audit_pass": s, "last_weight_check_pass": s, "location": f"c/{s}"}
            for s in (20, 30)
        ],
    }
    incident_id = store(job_world, report_event(alarm))["incidents"][0]["incident_id"]
    job_world.health_checked(incident_id)

    closing.close_incident(CloseRequest(incident_id, Outcome.CHECKED, None), job_world.deps)

    notice = job_world.notifier.published[-1].message
    assert "no replacement is proposed" in notice
    assert (
        'Resume from: checkpoint at step 30 ("c/30"), saved before the suspect window [31, 40]; '
        "tags: last_audit_pass 30, last_weight_check_pass 30"
    ) in notice
