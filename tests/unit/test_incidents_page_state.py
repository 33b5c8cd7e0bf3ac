"""The dashboard's page says, for each open incident, how long it has been open, whether its
node is isolated (cordoned on EKS, drained on Slurm, or why not), and links its card, its audit
trail, its execution, its node and its metrics."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from html import unescape

import pytest

from sdc_remediation.lambdas.models.incident import Incident
from sdc_remediation.lambdas.models.isolation import IsolatedNode, IsolationRecord, IsolationState
from sdc_remediation.lambdas.models.widget import WidgetZone
from sdc_remediation.lambdas.wording import cards, page
from tests.unit.test_incidents_page import parsed
from tests.unit.test_isolation import eks_world
from tests.unit.world import World

UTC_ZONE = WidgetZone.utc()


@pytest.fixture
def world() -> World:
    """Node isolation on: the incident's node is cordoned while it waits."""
    return eks_world()


@pytest.fixture
def waiting(world: World) -> Incident:
    world.store_fixture_report()
    return world.incident(world.awaiting_approval(isolated=True))


def shown(world: World, incident: Incident, now: datetime) -> str:
    return unescape(page.page_html([incident], world.deps.settings, now=now, zone=UTC_ZONE))


def opened(incident: Incident) -> datetime:
    return datetime.fromisoformat(incident.created_at).astimezone(UTC)


@pytest.mark.parametrize(
    ("after", "words"),
    [
        (timedelta(seconds=20), "under a minute"),
        (timedelta(minutes=7), "7 min"),
        (timedelta(hours=2, minutes=5), "2 h 05 min"),
        (timedelta(days=3, hours=4, minutes=1), "3 d 4 h"),
    ],
)
def test_each_incident_says_how_long_it_has_been_open(world, waiting, after, words):
    html = shown(world, waiting, opened(waiting) + after)

    assert f"Open for:</span> {words}</p>" in html


def test_a_cordoned_node_is_shown_cordoned_with_its_node_name(world, waiting):
    html = shown(world, waiting, opened(waiting))

    (node,) = [n.node_name for n in waiting.isolation.nodes.values()] if waiting.isolation else []
    assert f"Isolation:</span> cordoned and tainted: node {node}</p>" in html


def test_a_drained_slurm_node_is_shown_drained(world, waiting):
    drained = dataclasses.replace(
        waiting,
        isolation=IsolationRecord(
            state=IsolationState.ISOLATED,
            slurm_controller="i-0ctl0000000000001",
            nodes={
                waiting.instance_id: IsolatedNode(
                    IsolationState.ISOLATED, node_name="ip-10-1-2-3", cordoned_by_us=True
                )
            },
        ),
    )

    html = shown(world, drained, opened(waiting))

    assert "Isolation:</span> drained: Slurm node ip-10-1-2-3</p>" in html


def test_a_node_not_isolated_is_shown_with_why():
    world = World()
    world.store_fixture_report()
    incident = world.incident(world.awaiting_approval(isolated=False))

    html = shown(world, incident, opened(incident))

    assert "Isolation:</span> not isolated: no isolation recorded</p>" in html


def test_each_incident_links_its_card_audit_trail_execution_node_and_metrics(world, waiting):
    html = page.page_html([waiting], world.deps.settings, now=opened(waiting), zone=UTC_ZONE)

    found = {a["data-link"]: a for a in parsed(html).tags("a") if a.get("data-link")}
    assert list(found) == [link.value for link in page.PageLink]
    assert "href" not in found["card"] and "href" not in found["audit trail"]  # popups
    assert found["execution"]["href"] == (
        "https://us-west-2.console.aws.amazon.com/states/home?region=us-west-2"
        f"#/v2/executions/details/{waiting.execution_arn}"
    )
    assert "/eks/home?region=us-west-2#/clusters/" in (found["node"]["href"] or "")
    assert waiting.instance_id in (found["metrics"]["href"] or "")


def test_the_card_link_opens_the_card_as_the_notice_words_it(world, waiting):
    html = unescape(page.page_html([waiting], world.deps.settings, now=NOW(), zone=UTC_ZONE))

    popup = html.split('data-link="card"', 1)[1].split("</cwdb-action>", 1)[0]
    card = cards.approval_card(waiting, world.deps.settings)
    assert card.summary.lines[2].startswith("RECOMMENDATION: ")
    assert cards.render([card.summary]) in popup
    assert cards.render([card.isolation]) in popup and cards.render([card.evidence]) in popup


def test_the_audit_trail_link_names_the_command_that_verifies_it(world, waiting):
    html = unescape(page.page_html([waiting], world.deps.settings, now=NOW(), zone=UTC_ZONE))

    popup = html.split('data-link="audit trail"', 1)[1].split("</cwdb-action>", 1)[0]
    assert f"sdc show {waiting.incident_id}" in popup
    assert "dynamodbv2/home?region=us-west-2#item-explorer?table=" in popup


def NOW() -> datetime:
    return datetime(2026, 11, 30, 8, 30, tzinfo=UTC)
