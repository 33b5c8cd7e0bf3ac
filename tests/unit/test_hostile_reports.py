"""Reports a training pod can send with nothing but the training policy: every report is a
claim by an unauthenticated party. None of them may cordon, health-check or hold more of a
cluster than the guard allows, move a storm window, or shape what the approver reads."""

from __future__ import annotations

import copy
import dataclasses
import re
from datetime import timedelta

import pytest

from sdc_remediation.lambdas.logic import approval, intake
from sdc_remediation.lambdas.logic.core import ids
from sdc_remediation.lambdas.logic.evidence import summaries
from sdc_remediation.lambdas.logic.evidence.recommendation import judge
from sdc_remediation.lambdas.logic.opening import claims
from sdc_remediation.lambdas.models.errors import DecisionRefused, MalformedEvent
from sdc_remediation.lambdas.models.events import parse_contributor_event
from sdc_remediation.lambdas.models.hyperpod import NodeStatus
from sdc_remediation.lambdas.models.incident import IncidentState
from sdc_remediation.lambdas.models.report import parse_report_event
from sdc_remediation.lambdas.models.settings import IsolationConfig
from sdc_remediation.lambdas.wording import cards
from tests.unit.reports import REPORT_TIME, forged_event, large_report, suspect
from tests.unit.test_intake_attacks import HandlerDied, dies
from tests.unit.world import (
    CLUSTER,
    EKS,
    GROUP,
    INSTANCE,
    NODE,
    World,
    alarm_event,
    settings,
)

S = IncidentState


def instance(n: int) -> str:
    return f"i-0f{n:015x}"


def cluster_of(world: World, count: int) -> list[str]:
    """`count` more nodes in the fake cluster (beside INSTANCE)."""
    added = [instance(n) for n in range(count)]
    for instance_id in added:
        world.hyperpod.add_node(CLUSTER, GROUP, instance_id)
    return added


def store(world: World, event: dict):
    return intake.store_report(parse_report_event(event), world.deps)


def alarm_on(world: World, instance_id: str, event_id: str = "alarm-genuine"):
    event = copy.deepcopy(alarm_event())
    event["id"] = event_id
    event["detail"]["alarmContributor"]["attributes"]["InstanceId"] = instance_id
    at = world.clock.current + timedelta(seconds=1)
    event["detail"]["state"]["timestamp"] = at.strftime("%Y-%m-%dT%H:%M:%S.000+0000")
    return intake.open_incident(parse_contributor_event(event), world.deps)


def nothing_acted(world: World) -> bool:
    return (
        not world.workflow.executions
        and not world.hyperpod.calls_to("StartClusterHealthCheck")
        and world.kube.count("cordon") == 0
    )


# -- every node counts --------------------------------------------------------------------------


def test_an_ambiguous_report_naming_30_of_31_nodes_acts_on_none_and_sends_one_notice(world):
    nodes = cluster_of(world, 30)  # 31 nodes with INSTANCE: the guard allows 3

    result = store(world, forged_event(nodes))

    (job,) = result["incidents"]
    assert job["action"] == "held"
    assert world.incident(job["incident_id"]).instance_ids == nodes
    assert nothing_acted(world)
    assert len(world.notifier.published) == 1
    assert world.store.guard_state(CLUSTER).open_nodes == 0


def test_a_genuine_alarm_on_a_node_of_the_forged_job_is_its_own_incident(world):
    nodes = cluster_of(world, 30)
    (job,) = store(world, forged_event(nodes))["incidents"]

    result = alarm_on(world, nodes[7])

    assert result["incident_id"] != job["incident_id"]
    assert world.incident(result["incident_id"]).instance_id == nodes[7]


def test_after_the_storm_the_forged_job_started_is_reset_a_genuine_alarm_acts(world):
    nodes = cluster_of(world, 30)
    store(world, forged_event(nodes))
    hold = world.store.active_hold(CLUSTER)
    assert hold is not None  # its 30 nodes count towards the storm rule
    approval.decide(world.decision(hold.hold_id, "reset", "forged report"), world.deps)

    result = alarm_on(world, nodes[7])

    assert result["action"] == "opened"
    assert world.incident(result["incident_id"]).instance_id == nodes[7]


def test_a_job_naming_more_nodes_than_the_guard_allows_is_held_with_a_notice_naming_them(world):
    world.settings = settings(storm_threshold=100)  # no storm: the guard alone holds it
    nodes = cluster_of(world, 30)

    (job,) = store(world, forged_event(nodes))["incidents"]

    incident = world.incident(job["incident_id"])
    assert (incident.state, incident.hold.kind) == (S.HELD, "guard")
    assert "names 30 nodes, at most 3" in incident.hold.reason
    assert nothing_acted(world)
    (notice,) = world.notifier.published
    assert all(node in notice.message for node in nodes)


def test_a_genuine_alarm_beside_a_held_oversized_job_opens_and_acts(world):
    world.settings = settings(storm_threshold=100)
    nodes = cluster_of(world, 30)
    store(world, forged_event(nodes))

    result = alarm_on(world, nodes[3])

    assert result["action"] == "opened"
    assert list(world.workflow.executions) == [result["incident_id"]]


# -- our clock, not theirs ---------------------------------------------------------------------


def test_culprits_that_are_no_nodes_of_the_cluster_start_no_storm(world):
    cluster_of(world, 4)  # no more named than the cluster has nodes
    made_up = [instance(100 + n) for n in range(4)]  # HyperPod knows none of them

    result = store(world, forged_event(made_up, ambiguous=False, role="culprit"))

    assert {r["action"] for r in result["incidents"]} == {"skipped"}
    assert world.store.active_hold(CLUSTER) is None
    assert world.store.flagged_instances(CLUSTER, 0) == set()


def test_culprit_reports_an_hour_apart_each_within_the_window_of_receipt_make_a_storm(world):
    nodes = cluster_of(world, 4)
    world.settings = settings(guard_max_open_nodes=10, guard_max_open_percent=100)

    for n, node in enumerate(nodes):
        # dated an hour apart by the reporter, received within a minute by the pipeline
        at = REPORT_TIME - timedelta(hours=n)
        store(world, forged_event([node], ambiguous=False, role="culprit", at=at))

    assert world.store.active_hold(CLUSTER) is not None


@pytest.mark.parametrize("ahead", [timedelta(days=365), timedelta(minutes=10)])
def test_a_report_dated_ahead_of_receipt_is_refused_audited_and_flags_nothing(world, ahead):
    nodes = cluster_of(world, 4)
    event = forged_event(nodes, ambiguous=False, role="culprit", at=world.clock.current + ahead)

    with pytest.raises(MalformedEvent, match=r"detail\.emitted_at"):  # retried, then the DLQ
        store(world, event)

    (entry,) = world.audit.entries(f"event#{event['id']}")
    assert (entry.action, entry.details["field"]) == ("event_refused", "detail.emitted_at")
    assert world.store.flagged_instances(CLUSTER, 0) == set()
    assert world.store.reports == {}


def test_after_a_year_ahead_report_and_a_reset_a_genuine_alarm_acts(world):
    nodes = cluster_of(world, 4)
    ahead = world.clock.current + timedelta(days=365)
    with pytest.raises(MalformedEvent):
        store(world, forged_event(nodes, ambiguous=False, role="culprit", at=ahead))

    result = alarm_on(world, INSTANCE)

    assert result["action"] == "opened"


# -- report text never shapes the card --------------------------------------------------------

INJECTED = (
    "\r\nRECOMMENDATION: REPLACE AFTER REVIEW\x00\u202e\u2028\u200b\r\nWHAT TO DO\r\n"
    '    {"incident_id": "sdc-ml-cluster-1-i-0ffffffffffffffff-20261130T000000", '
    '"decision": "approve", "comment": "<why>"}\n'
)


def approval_card_for(world: World, event: dict) -> str:
    (opened,) = store(world, event)["incidents"]
    return card_for(world, opened["incident_id"])


def card_for(world: World, incident_id: str) -> str:
    """The approval card of the open incident, after its health check."""
    world.awaiting_approval(incident_id)
    (card,) = [
        p for p in world.notifier.published if p.attributes.get("kind") == "approval_request"
    ]
    return card.message


def structure(card: str) -> tuple[list[str], list[str]]:
    """The lines that start a section (nothing reporter-written may start a line), and the
    decision trailer from WHAT TO DO to the raw values."""
    lines = card.split("\n")
    return [line for line in lines if line and not line.startswith(" ")], lines[
        lines.index("WHAT TO DO") : lines.index(cards.RAW_HEADING)
    ]


def hostile_event() -> dict:
    return forged_event(
        [INSTANCE],
        ambiguous=False,
        role="culprit",
        job_name="llama" + INJECTED[:200],
        suspects=[suspect(node_name="n" + INJECTED[:200], reasons=["bad" + INJECTED])],
        errors=["e" + INJECTED],
    )


def clean_event() -> dict:
    return forged_event(
        [INSTANCE],
        ambiguous=False,
        role="culprit",
        job_name="llama",
        suspects=[suspect()],
        errors=["e"],
    )


def test_hostile_report_text_leaves_the_cards_sections_and_decision_trailer_as_a_clean_one(world):
    clean_card = approval_card_for(World(), clean_event())

    hostile_card = approval_card_for(world, hostile_event())

    assert structure(hostile_card) == structure(clean_card)
    unwrapped = re.sub(r"\n +", " ", hostile_card)  # a long line continues, indented
    assert '("bad RECOMMENDATION: REPLACE AFTER REVIEW WHAT TO DO {' in unwrapped  # quoted


@pytest.mark.parametrize("char", ["\x00", "\r", "\u202e", "\u2028", "\u200b"])
def test_no_control_or_bidirectional_character_of_a_report_reaches_the_topic(world, char):
    approval_card_for(world, hostile_event())

    for published in world.notifier.published:
        assert char not in published.message and char not in published.subject


def test_a_hostile_job_name_is_shown_quoted_and_clipped_in_the_held_notice(world):
    world.switch.value = "true"

    store(world, hostile_event())

    (notice,) = world.notifier.published
    assert 'job "llama RECOMMENDATION: REPLACE AFTER REVIEW' in notice.message
    assert "\nRECOMMENDATION" not in notice.message and "\nWHAT TO DO" not in notice.message


# -- bounded sizes, end to end -----------------------------------------------------------------


def test_two_190_kb_reports_on_a_genuine_incident_still_get_the_approval_card_out(world):
    store(world, large_report("r-large-0000001"))
    card = approval_card_for(world, large_report("r-large-0000002"))

    assert len(card.encode()) <= cards.MESSAGE_MAX_BYTES
    assert "WHAT TO DO" in card
    (incident,) = world.store.incidents.values()
    assert len(incident.reports) == 2


def test_what_sdc_show_prints_lists_every_report_of_the_incident(world):
    world.settings = settings(guard_max_open_nodes=10, guard_max_open_percent=100)
    for n in range(3):
        store(world, large_report(f"r-large-{n:07d}"))
    (incident,) = world.store.incidents.values()
    incident.recommendation = judge(incident, [], incident.updated_at)

    shown = cards.approval_card(incident, world.settings, max_bytes=None).text

    assert all(f"report r-large-{n:07d}" in shown for n in range(3))


def test_a_card_too_large_shows_the_newest_reports_and_names_how_many_more(world):
    for n in range(3):
        store(world, large_report(f"r-large-{n:07d}"))
    (incident,) = world.store.incidents.values()
    incident.recommendation = judge(incident, [], incident.updated_at)
    full = cards.approval_card(incident, world.settings, max_bytes=None).text

    card = cards.approval_card(incident, world.settings, max_bytes=len(full.encode()) - 1).text

    assert f"more reports: `sdc show {incident.incident_id}`" in card
    assert "report r-large-0000002" in card  # the newest is shown


def test_even_a_tiny_budget_keeps_the_recommendation_and_decision_trailer_whole(world):
    store(world, large_report("r-large-0000001"))
    (incident,) = world.store.incidents.values()
    incident.recommendation = judge(incident, [], incident.updated_at)
    full = cards.approval_card(incident, world.settings, max_bytes=None)

    card = cards.approval_card(incident, world.settings, max_bytes=3_000)

    assert len(card.text.encode()) <= 3_000
    assert (card.recommendation, card.what_to_do) == (full.recommendation, full.what_to_do)


def test_the_evidence_on_an_incident_stays_bounded_in_bytes_however_many_reports_arrive(world):
    for n in range(60):
        store(world, large_report(f"r-large-{n:07d}"))

    (incident,) = world.store.incidents.values()
    assert summaries.size_of(incident.evidence) <= summaries.MAX_EVIDENCE_BYTES
    assert incident.evidence_dropped > 0


def test_a_large_report_keeps_every_entry_about_its_own_instance(world):
    alarm_ranks = list(range(24))
    event = large_report("r-large-0000001")
    event["detail"]["culprits"] = [*alarm_ranks[:2], *range(1000, 1100)]

    store(world, event)

    (incident,) = world.store.incidents.values()
    (summary,) = incident.reports
    assert {0, 1} <= set(summary.culprits)
    assert summary.left_out["culprits"] == 100 - summaries.KEPT_OTHERS


# -- claims checked against Kubernetes --------------------------------------------------------


def eks_world() -> World:
    isolate = {CLUSTER: IsolationConfig(isolate=True, eks_cluster=EKS)}
    return World(eks_cluster=EKS, settings=settings(node_isolation=isolate))


def culprit_naming_node(node_name: str) -> dict:
    """A report naming rank 0 on INSTANCE the culprit of a compute check, on `node_name`."""
    return forged_event(
        [INSTANCE],
        ambiguous=False,
        role="culprit",
        check="compute",
        culprits=[0],
        suspects=[suspect(node_name=node_name)],
    )


def test_a_culprit_report_naming_another_node_than_kubernetes_finds_is_refused():
    world = eks_world()

    (result,) = store(world, culprit_naming_node("ip-10-9-9-9.evil.internal"))["incidents"]

    incident = world.incident(result["incident_id"])
    assert (result["action"], incident.state) == ("skipped", S.SKIPPED)
    assert f"Kubernetes finds {INSTANCE} by providerID as node {NODE}" in (incident.reason or "")
    assert nothing_acted(world)


def test_an_alarm_whose_only_report_is_not_confirmed_shows_it_and_proposes_a_health_check_only():
    world = eks_world()
    world.switch.value = "true"  # confirmed and stored, but held
    store(world, culprit_naming_node(NODE))
    world.switch.value = "false"
    node = world.kube.nodes[EKS].pop(NODE)  # the node is another one now
    world.kube.nodes[EKS]["ip-10-1-2-3.renamed.internal"] = node
    opened = alarm_on(world, INSTANCE)

    card = card_for(world, opened["incident_id"])

    assert "\nCLAIMS NOT CONFIRMED" in card
    assert "RECOMMENDATION: HEALTH CHECK ONLY" in card


def test_a_report_kubernetes_refuses_is_not_stored_and_an_alarm_does_not_bring_it():
    world = eks_world()
    assert store(world, culprit_naming_node("ip-10-9-9-9.evil.internal"))["stored"] is False
    opened = alarm_on(world, INSTANCE)

    incident = world.incident(opened["incident_id"])
    card = card_for(world, opened["incident_id"])

    assert world.store.reports == {}
    assert (incident.reports, incident.unconfirmed) == ([], {})
    assert "RECOMMENDATION: REPLACE" not in card


def test_a_report_naming_the_node_kubernetes_finds_proposes_what_its_evidence_says():
    world = eks_world()

    card = approval_card_for(world, culprit_naming_node(NODE))

    assert "CLAIMS NOT CONFIRMED" not in card
    assert "RECOMMENDATION: REPLACE AFTER REVIEW" in card


def test_a_job_level_incident_leaves_out_an_instance_whose_node_does_not_match():
    world = eks_world()
    world.settings = dataclasses.replace(
        world.settings, guard_max_open_nodes=4, guard_max_open_percent=100, storm_threshold=8
    )
    nodes = cluster_of(world, 5)[:2]  # room in the guard beside the job's three nodes
    for n, node in enumerate(nodes):
        world.kube.add_node(EKS, f"node-{n}", node)
    event = forged_event(
        [INSTANCE, *nodes],
        suspects=[
            suspect(rank=0, role="involved", node_name="somewhere-else"),
            *(
                suspect(rank=n + 1, role="involved", instance_id=node, node_name=f"node-{n}")
                for n, node in enumerate(nodes)
            ),
        ],
    )

    (job,) = store(world, event)["incidents"]

    incident = world.incident(job["incident_id"])
    assert incident.instance_ids == nodes
    assert list(incident.unconfirmed) == [INSTANCE]


# -- claims checked against the job's pods ------------------------------------------------------

JOB_LABEL = "training.kubeflow.org/job-name"


def job_pods_world() -> World:
    """EKS with node isolation and job pods listed by JOB_LABEL; the job `llama` runs on
    INSTANCE's node only."""
    isolate = {CLUSTER: IsolationConfig(isolate=True, eks_cluster=EKS, job_pods=JOB_LABEL)}
    world = World(eks_cluster=EKS, settings=settings(node_isolation=isolate))
    world.kube.add_pod(EKS, NODE, {JOB_LABEL: "llama"})
    return world


def test_an_instance_the_job_runs_no_pod_on_is_named_as_such_and_left_out_of_the_job():
    world = job_pods_world()
    world.settings = dataclasses.replace(
        world.settings, guard_max_open_nodes=4, guard_max_open_percent=100, storm_threshold=8
    )
    other = cluster_of(world, 4)[0]  # room in the guard beside the job's two nodes
    world.kube.add_node(EKS, "node-other", other)

    (job,) = store(world, forged_event([INSTANCE, other], job_name="llama"))["incidents"]

    incident = world.incident(job["incident_id"])
    assert incident.instance_ids == [INSTANCE]
    assert 'the job "llama" runs no pod on node node-other' in incident.unconfirmed[other]


def test_a_culprit_the_job_runs_no_pod_on_is_refused_and_acts_on_nothing():
    world = job_pods_world()
    event = culprit_naming_node(NODE)
    event["detail"]["job_name"] = "another-job"

    (result,) = store(world, event)["incidents"]

    assert result["action"] == "skipped"
    assert "runs no pod on node" in (world.incident(result["incident_id"]).reason or "")
    assert nothing_acted(world)
    assert world.store.flagged_instances(CLUSTER, 0) == set()


def test_a_culprit_on_a_node_the_job_runs_on_proposes_what_its_evidence_says():
    world = job_pods_world()
    event = culprit_naming_node(NODE)
    event["detail"]["job_name"] = "llama"

    card = approval_card_for(world, event)

    assert "CLAIMS NOT CONFIRMED" not in card
    assert world.kube.count("pod_nodes") == 1


def test_a_contributor_alarm_for_a_node_no_job_runs_on_cordons_nothing_and_is_skipped():
    world = job_pods_world()
    other = cluster_of(world, 1)[0]
    world.kube.add_node(EKS, "node-other", other)  # a node of the cluster, no job's pod on it

    result = alarm_on(world, other)

    assert result["action"] == "skipped"
    assert "no job runs a pod on node node-other" in world.incident(result["incident_id"]).reason
    assert nothing_acted(world)
    assert world.store.flagged_instances(CLUSTER, 0) == set()


def test_forged_alarms_for_nodes_no_job_runs_on_start_no_storm_and_a_genuine_one_opens():
    world = job_pods_world()
    world.settings = dataclasses.replace(world.settings, storm_threshold=2)
    for n, other in enumerate(cluster_of(world, 4)):
        world.kube.add_node(EKS, f"node-{n}", other)
        alarm_on(world, other, f"alarm-forged-{n}")

    result = alarm_on(world, INSTANCE)

    assert world.store.active_hold(CLUSTER) is None
    assert result["action"] == "opened"


def test_a_job_name_that_is_no_label_value_cannot_be_checked_and_acts_on_nothing():
    world = job_pods_world()

    (job,) = store(world, forged_event([INSTANCE], job_name="llama,other=x"))["incidents"]

    assert job["action"] == "skipped"
    assert world.kube.count("pod_nodes") == 0


def test_a_job_naming_more_instances_than_a_claim_asks_about_is_held_asking_hyperpod_a_few(world):
    world.settings = settings(storm_threshold=1000)
    nodes = cluster_of(world, 258)

    (job,) = store(world, forged_event(nodes))["incidents"]

    incident = world.incident(job["incident_id"])
    assert (incident.state, incident.hold.kind) == (S.HELD, "guard")
    assert incident.instance_ids == nodes  # `proceed` asks about each
    assert len(world.hyperpod.calls_to("DescribeClusterNode")) == claims.MAX_ASKED


def test_a_report_naming_more_instances_than_the_cluster_has_nodes_is_ignored_whole(world):
    nodes = cluster_of(world, 9)  # 10 nodes with INSTANCE
    made_up = [f"i-0e{n:015x}" for n in range(2048 - len(nodes))]

    result = store(world, forged_event([*nodes, *made_up], ambiguous=False, role="culprit"))

    assert result == {"report_id": result["report_id"], "stored": False, "incidents": []}
    assert len(world.hyperpod.calls) <= 10
    assert not world.store.incidents
    (entry,) = [e for c in world.audit.all_chains().values() for e in c]
    assert entry.action == "report_ignored"
    assert "names 2048 instances; cluster ml-cluster-1 has 10 nodes" in entry.details["reason"]


def test_a_job_too_large_for_the_guard_is_held_without_asking_kubernetes():
    world = eks_world()
    nodes = cluster_of(world, 30)

    store(world, forged_event(nodes))

    assert world.kube.count("find_node") == 0


# -- letting a held job-level incident proceed ------------------------------------------------


def held_big_job(world: World, nodes: int = 6) -> tuple[str, list[str]]:
    """A genuine-looking job-level incident over `nodes` nodes, held by a guard of 3."""
    world.settings = settings(storm_threshold=100)
    named = cluster_of(world, nodes + 30)[:nodes]
    (job,) = store(world, forged_event(named))["incidents"]
    assert job["action"] == "held"
    return job["incident_id"], named


def held_job_on_eks(world: World, runs_on: int) -> tuple[str, list[str]]:
    """A job-level incident over 6 Kubernetes nodes, held by a guard of 3, whose job `llama`
    runs pods on the first `runs_on` of them only."""
    isolate = {CLUSTER: IsolationConfig(isolate=True, eks_cluster=EKS, job_pods=JOB_LABEL)}
    world.settings = settings(storm_threshold=100, node_isolation=isolate)
    named = cluster_of(world, 36)[:6]
    for n, node in enumerate(named):
        world.kube.add_node(EKS, f"node-{n}", node)
        if n < runs_on:
            world.kube.add_pod(EKS, f"node-{n}", {JOB_LABEL: "llama"})
    (job,) = store(world, forged_event(named, job_name="llama"))["incidents"]
    assert job["action"] == "held"
    return job["incident_id"], named


def test_proceed_on_a_held_job_the_job_runs_on_none_of_is_refused_and_acts_on_nothing():
    world = World(eks_cluster=EKS)
    held, _ = held_job_on_eks(world, runs_on=0)

    with pytest.raises(DecisionRefused, match="that Kubernetes confirms"):
        approval.decide(world.decision(held, "proceed"), world.deps)

    assert nothing_acted(world)
    assert world.store.guard_state(CLUSTER).open_nodes == 0


def test_proceed_acts_only_on_the_held_nodes_kubernetes_confirms():
    world = World(eks_cluster=EKS)
    held, named = held_job_on_eks(world, runs_on=2)

    approval.decide(world.decision(held, "proceed"), world.deps)

    (opened,) = [i for i in world.store.incidents.values() if i.state is S.OPENED]
    assert opened.instance_ids == named[:2]
    assert set(opened.unconfirmed) == set(named[2:])


def test_a_job_whose_only_confirmed_node_joined_an_open_incident_cannot_proceed_over_the_rest():
    """An oversized job is asked of HyperPod for its first nodes only, and its report is stored
    under those it confirms. A forged one whose first node is busy with an open incident and whose
    other first nodes are made up was held over nodes never asked about, its report stored under
    none of them: `proceed` then checked the job's name only and acted on nodes whose names the
    report got wrong."""
    world = eks_world()
    world.settings = dataclasses.replace(world.settings, storm_threshold=100)
    named = cluster_of(world, 36)[:4]
    for n, node in enumerate(named):
        world.kube.add_node(EKS, f"node-{n}", node)
    assert alarm_on(world, INSTANCE)["action"] == "opened"
    made_up = [f"i-0e{n:015x}" for n in range(claims.MAX_ASKED - 1)]
    event = forged_event(
        [INSTANCE, *made_up, *named],
        suspects=[
            suspect(rank=n, role="involved", instance_id=node, node_name="ip-10-9-9-9")
            for n, node in enumerate(named)
        ],
    )
    (_, job) = store(world, event)["incidents"]

    with pytest.raises(DecisionRefused):
        approval.decide(world.decision(job["incident_id"], "proceed"), world.deps)

    assert len(world.workflow.executions) == 1  # the alarm's only


def test_proceed_checks_the_node_names_of_a_held_job_whose_report_was_redelivered(monkeypatch):
    """The first delivery died once the report was stored; the held job came of the
    redelivery, received later, whose receipt names no stored report: `proceed` found none,
    checked the job's name only and acted on nodes whose names the report got wrong."""
    world = eks_world()
    world.settings = dataclasses.replace(world.settings, storm_threshold=100)
    named = cluster_of(world, 36)[:6]
    for n, node in enumerate(named):
        world.kube.add_node(EKS, f"node-{n}", node)
    event = forged_event(
        named,
        suspects=[
            suspect(rank=n, role="involved", instance_id=node, node_name="ip-10-9-9-9")
            for n, node in enumerate(named)
        ],
    )
    with monkeypatch.context() as patch:
        patch.setattr(intake, "flag", dies)
        with pytest.raises(HandlerDied):
            store(world, event)
    world.clock.current += timedelta(seconds=2)
    (job,) = store(world, event)["incidents"]  # redelivered
    assert job["action"] == "held"

    with pytest.raises(DecisionRefused, match="that Kubernetes confirms"):
        approval.decide(world.decision(job["incident_id"], "proceed"), world.deps)

    assert nothing_acted(world)


def test_proceed_checks_the_node_names_of_a_held_job_whose_first_node_is_gone():
    """The report of a job too large to act on is stored under the nodes the intake asked about
    (its first eight) that HyperPod confirmed. When the only one of them left the cluster before
    a person let the job proceed, `proceed` looked for the report under the nodes HyperPod still
    knows, found none, checked the job's name only and acted on nodes the report named wrongly."""
    world = eks_world()
    world.settings = dataclasses.replace(world.settings, storm_threshold=100)
    named = cluster_of(world, 36)[:4]
    for n, node in enumerate(named):
        world.kube.add_node(EKS, f"node-{n}", node)
    world.kube.add_node(EKS, NODE, INSTANCE)
    made_up = [f"i-0e{n:015x}" for n in range(claims.MAX_ASKED - 1)]
    event = forged_event(
        [INSTANCE, *made_up, *named],
        suspects=[
            suspect(rank=0, role="involved", node_name=NODE),
            *(
                suspect(rank=n + 1, role="involved", instance_id=node, node_name="ip-10-9-9-9")
                for n, node in enumerate(named)
            ),
        ],
    )
    (job,) = store(world, event)["incidents"]
    assert job["action"] == "held"
    gone = world.hyperpod.node(CLUSTER, INSTANCE)
    assert gone is not None
    gone.status = NodeStatus.NOT_FOUND.value

    with pytest.raises(DecisionRefused, match="that Kubernetes confirms"):
        approval.decide(world.decision(job["incident_id"], "proceed"), world.deps)

    assert nothing_acted(world)


def test_a_report_reusing_a_stored_reports_id_with_other_content_is_refused_and_opens_nothing():
    """A report id names one report: the stored copy is what a retake, a proceed and an alarm
    read. A pod stored a culprit report under a node, then sent a job too large for the guard
    under the same id, naming the node first and four others under wrong names: the held job's
    `proceed` read the first copy's claims, which name none of the four, and acted on them."""
    world = eks_world()
    world.settings = dataclasses.replace(world.settings, storm_threshold=100)
    named = cluster_of(world, 36)[:4]
    for n, node in enumerate(named):
        world.kube.add_node(EKS, f"node-{n}", node)
    first = forged_event([INSTANCE], ambiguous=False, role="culprit", report_id="r-reused-00000001")
    world.switch.value = "true"  # held: the node has no open incident for the job to join
    store(world, first)
    world.switch.value = "false"
    world.clock.current += timedelta(seconds=2)
    job = forged_event(
        [INSTANCE, *named],
        report_id="r-reused-00000001",
        suspects=[
            suspect(rank=n + 1, role="involved", instance_id=node, node_name="ip-10-9-9-9")
            for n, node in enumerate(named)
        ],
    )

    with pytest.raises(MalformedEvent, match="received before with other content"):
        store(world, job)

    assert world.audit.entries(ids.event_subject(job["id"]))[-1].action == "event_refused"
    assert not [i for i in world.store.incidents.values() if i.is_job]


def test_the_held_notice_of_a_job_too_large_for_the_guard_says_how_to_let_it_proceed(world):
    held, _ = held_big_job(world)

    (notice,) = world.notifier.published

    assert f'{{"incident_id": "{held}", "decision": "proceed"' in notice.message
    assert f'sdc proceed {held} -m "<why>"' in notice.message


def test_proceed_opens_a_job_level_incident_over_the_held_nodes_audited_under_both(world):
    held, named = held_big_job(world)

    result = approval.decide(world.decision(held, "proceed", "genuine: check them all"), world.deps)

    assert result == {"incident_id": held, "decision": "proceed", "accepted": True}
    (opened,) = [i for i in world.store.incidents.values() if i.state is S.OPENED]
    assert (opened.scope, opened.instance_ids) == ("job", named)
    assert list(world.workflow.executions) == [opened.incident_id]
    assert world.store.guard_state(CLUSTER).open_nodes == len(named)
    last = world.audit.entries(held)[-1]
    assert (last.action, last.details["incident_id"]) == ("proceeded", opened.incident_id)
    assert last.actor.startswith("approver:")
    assert world.audit.entries(opened.incident_id)[0].details["proceeded_from"] == held


def test_while_it_runs_its_nodes_fill_the_guard_and_a_new_alarm_is_held(world):
    held, _ = held_big_job(world)
    approval.decide(world.decision(held, "proceed"), world.deps)

    result = alarm_on(world, INSTANCE)

    assert result["action"] == "held"


def test_a_second_proceed_is_refused_and_audited(world):
    held, _ = held_big_job(world)
    approval.decide(world.decision(held, "proceed"), world.deps)

    with pytest.raises(DecisionRefused, match="already proceeded"):
        approval.decide(world.decision(held, "proceed"), world.deps)

    assert world.audit.entries(held)[-1].action == "decision_refused"
    assert len(world.workflow.executions) == 1


@pytest.mark.parametrize(
    ("hold", "says"),
    [("storm", "storm hold"), ("paused", "paused")],
)
def test_proceed_is_refused_while_the_cluster_is_storm_held_or_paused(world, hold, says):
    held, named = held_big_job(world)
    if hold == "paused":
        world.switch.value = "true"
    else:
        world.settings = settings(storm_threshold=2)
        for n, culprit in enumerate([INSTANCE, named[0]]):
            store(
                world,
                forged_event(
                    [culprit], ambiguous=False, role="culprit", report_id=f"culprit-{n:04d}"
                ),
            )

    with pytest.raises(DecisionRefused, match=says):
        approval.decide(world.decision(held, "proceed"), world.deps)

    assert not world.workflow.executions


def test_only_a_job_level_incident_held_by_the_guard_may_proceed(world):
    world.switch.value = "true"
    held = alarm_on(world, INSTANCE)["incident_id"]  # a node-level incident, held paused
    world.switch.value = "false"

    with pytest.raises(DecisionRefused, match="only a held job-level incident proceeds"):
        approval.decide(world.decision(held, "proceed"), world.deps)
