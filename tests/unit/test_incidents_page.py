"""The dashboard's page of open incidents (lambdas/wording/page.py): what it lists, in which
order, escaped, with which buttons, and what the buttons lead to."""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser

import pytest

from sdc_remediation.lambdas.logic.approval import incidents_page
from sdc_remediation.lambdas.logic.ports import OpenIncidents, PageDeps
from sdc_remediation.lambdas.models.deadline import ApprovalDeadline
from sdc_remediation.lambdas.models.incident import Incident, IncidentState
from sdc_remediation.lambdas.models.recovery import MAX_REBOOTS, RebootRecord
from sdc_remediation.lambdas.models.widget import (
    WidgetRequest,
    WidgetRequestError,
    WidgetZone,
    parse_widget_request,
)
from sdc_remediation.lambdas.wording import page
from tests.unit.world import ALICE, APPROVAL_ARN, World

NOW = datetime(2026, 11, 30, 8, 30, tzinfo=UTC)
BERLIN = WidgetZone("Europe/Berlin", timedelta(hours=1))


class Listed:
    """OpenIncidents over a list (what the `by_state` index would answer)."""

    def __init__(self, incidents: list[Incident]) -> None:
        self.incidents = incidents

    def open_incidents(self) -> list[Incident]:
        return [i for i in self.incidents if not i.state.terminal]


_port: OpenIncidents = Listed([])


class Elements(HTMLParser):
    """Each element's tag and attributes, and the text of each `a` element."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str | None]]] = []
        self.links: list[str] = []
        self._in_a = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, dict(attrs)))
        self._in_a = tag == "a"

    def handle_data(self, data: str) -> None:
        if self._in_a:
            self.links.append(data)

    def tags(self, name: str) -> list[dict[str, str | None]]:
        return [attrs for tag, attrs in self.found if tag == name]


def parsed(html: str) -> Elements:
    elements = Elements()
    elements.feed(html)
    return elements


@pytest.fixture
def waiting(world: World) -> Incident:
    world.store_fixture_report()
    return world.incident(world.awaiting_approval())


def with_timeout(incident: Incident, seconds: int = 3600) -> Incident:
    """The incident as if its approval had been requested with a timeout of `seconds`: the page
    reads the deadline recorded then, never the settings of now."""
    assert incident.approval_requested_at is not None
    deadline = ApprovalDeadline.after(incident.approval_requested_at, seconds, "UTC")
    return dataclasses.replace(incident, approval_deadline=deadline)


def test_an_incident_awaiting_approval_shows_evidence_recommendation_deadline_and_exposure(
    world, waiting
):
    html = page.page_html([with_timeout(waiting)], world.deps.settings, now=NOW, zone=BERLIN)

    assert waiting.incident_id in html
    assert "metrics: sdc_replay_mismatch; reports: 1" in html
    assert "REPLACE AFTER REVIEW" in html
    assert "rank 13 mismatched in both of its ring comparisons" in html
    # requested 08:15:28 UTC + 1 h
    assert "expires 2026-11-30 10:15 Europe/Berlin (2026-11-30 09:15 UTC), in 0 h 45 min" in html
    assert "exposure window: steps 21-30 (10 steps" in html


def test_a_passed_deadline_says_a_decision_now_is_refused(world, waiting):
    html = page.page_html(
        [with_timeout(waiting, 60)], world.deps.settings, now=NOW, zone=WidgetZone.utc()
    )

    assert "expired at 2026-11-30 08:16 UTC: a decision now is refused" in html


def test_an_incident_awaiting_approval_has_approve_reject_and_reboot_instead_buttons(
    world, waiting
):
    elements = parsed(page.page_html([waiting], world.deps.settings, now=NOW, zone=BERLIN))

    buttons = [a for a in elements.tags("a") if "btn" in (a.get("class") or "")]
    assert [b["data-decision"] for b in buttons] == ["approve", "reject", "reboot"]
    labels = [link for link in elements.links if link in page.BUTTON_LABELS.values()]
    assert labels == ["Approve", "Reject", "Reboot instead"]
    actions = elements.tags("cwdb-action")  # the card's and audit trail's popups, the buttons'
    assert [a["action"] for a in actions] == ["html"] * (len(page.POPUP_LINKS) + 3)
    assert all(a["display"] == "popup" for a in actions)
    assert not any(a.get("endpoint") for a in actions), "a button must never call a function"


def test_each_button_gives_the_command_that_decides_with_the_viewer_s_identity(world, waiting):
    html = page.page_html([waiting], world.deps.settings, now=NOW, zone=BERLIN)

    assert f"sdc approve {waiting.incident_id} -m &#x27;&lt;why&gt;&#x27;" in html
    assert f"sdc reject {waiting.incident_id} -m &#x27;&lt;why&gt;&#x27;" in html
    assert f"sdc reboot {waiting.incident_id} -m &#x27;&lt;why&gt;&#x27;" in html


def test_an_incident_already_rebooted_offers_no_second_reboot(world, waiting):
    rebooted = dataclasses.replace(waiting, reboot=RebootRecord(count=1))
    assert rebooted.reboots == MAX_REBOOTS

    html = page.page_html([rebooted], world.deps.settings, now=NOW, zone=BERLIN)

    buttons = [a for a in parsed(html).tags("a") if "btn" in (a.get("class") or "")]
    assert [b["data-decision"] for b in buttons] == ["approve", "reject"]
    assert "sdc reboot" not in html


def test_the_reboot_popup_gives_the_console_input_of_a_reboot_like_the_card(world, waiting):
    html = page.page_html([waiting], world.deps.settings, now=NOW, zone=BERLIN)

    reboot = html.split('data-decision="reboot"', 1)[1]
    popup = reboot.split("<cwdb-action", 1)[1].split("</cwdb-action>", 1)[0]
    assert f"Reboot instead {waiting.incident_id}" in popup
    assert "restarts the same instance rather than replacing it" in popup
    assert (
        f"{{&quot;incident_id&quot;: &quot;{waiting.incident_id}&quot;, "
        "&quot;decision&quot;: &quot;reboot&quot;" in popup
    )


def test_where_console_approvals_are_accepted_the_popup_links_the_approval_machine_and_input(
    world, waiting
):
    html = page.page_html([waiting], world.deps.settings, now=NOW, zone=BERLIN)

    assert f"statemachines/view/{APPROVAL_ARN}" in html
    assert "&quot;decision&quot;: &quot;approve&quot;" in html


def test_with_approvers_the_popup_offers_no_console_approval_and_names_who_may_decide(
    world, waiting
):
    settings = dataclasses.replace(world.deps.settings, approvers=(ALICE,))

    html = page.page_html([waiting], settings, now=NOW, zone=BERLIN)

    assert "statemachines/view" not in html
    assert "refused in this deployment: use the command" in html
    assert f"Allowed approvers: {ALICE}" in html


def test_incident_text_is_escaped_never_markup(world, waiting):
    hostile = "<script>alert(1)</script><a href='x'>click</a>"
    waiting.job_name = hostile
    waiting.scope = waiting.scope.JOB
    waiting.evidence[0]["metric"] = '"><img src=x onerror=alert(1)>'

    html = page.page_html([waiting], world.deps.settings, now=NOW, zone=BERLIN)

    assert "<script>" not in html and "<img" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    hrefs = [a["href"] for a in parsed(html).tags("a") if a.get("href")]
    assert hrefs and all(h.startswith("https://us-west-2.console.aws.amazon.com/") for h in hrefs)


def test_a_hostile_incident_id_cannot_break_out_of_the_shell_command(world, waiting):
    waiting.incident_id = "x; rm -rf ~ '$(id)'"

    html = page.page_html([waiting], world.deps.settings, now=NOW, zone=BERLIN)

    assert "sdc approve &#x27;x; rm -rf ~ &#x27;&quot;&#x27;&quot;&#x27;$(id)" in html


def test_awaiting_approval_comes_first_soonest_deadline_on_top_then_the_rest_oldest_first(
    world, waiting
):
    def copy(incident_id: str, state: IncidentState, created: str, requested: str | None):
        return dataclasses.replace(
            waiting,
            incident_id=incident_id,
            state=state,
            created_at=created,
            approval_requested_at=requested,
        )

    incidents = [
        copy("old-check", IncidentState.HEALTH_CHECK, "2026-11-30T07:00:00+00:00", None),
        copy(
            "late-wait",
            IncidentState.AWAITING_APPROVAL,
            "2026-11-30T06:00:00+00:00",
            "2026-11-30T08:20:00+00:00",
        ),
        copy("new-open", IncidentState.OPENED, "2026-11-30T08:00:00+00:00", None),
        copy(
            "early-wait",
            IncidentState.AWAITING_APPROVAL,
            "2026-11-30T07:30:00+00:00",
            "2026-11-30T08:00:00+00:00",
        ),
        copy("done", IncidentState.REPLACED, "2026-11-30T05:00:00+00:00", None),
    ]

    html = page.page_html(incidents, world.deps.settings, now=NOW, zone=BERLIN)

    listed = re.findall(r'data-incident="([^"]+)"', html)
    assert listed == ["early-wait", "late-wait", "old-check", "new-open"]
    assert "Open SDC incidents: 4 (2 awaiting approval)" in html


def test_an_incident_not_awaiting_approval_has_no_buttons(world, waiting):
    checking = dataclasses.replace(waiting, state=IncidentState.HEALTH_CHECK)

    html = page.page_html([checking], world.deps.settings, now=NOW, zone=BERLIN)

    assert checking.incident_id in html
    assert "sdc approve" not in html and "data-decision" not in html
    assert not [a for a in parsed(html).tags("a") if "btn" in (a.get("class") or "")]


def test_no_open_incident_says_so(world):
    html = page.page_html([], world.deps.settings, now=NOW, zone=BERLIN)

    assert "No open incidents." in html


def test_the_stage_lists_what_the_port_reads_and_answers_describe_with_the_documentation(
    world, waiting
):
    deps = PageDeps(settings=world.deps.settings, incidents=Listed([waiting]), clock=world.clock)

    shown = incidents_page(WidgetRequest(describe=False, zone=BERLIN), deps)
    described = incidents_page(WidgetRequest(describe=True, zone=BERLIN), deps)

    assert waiting.incident_id in shown
    assert described == page.DESCRIBE


def test_the_widget_context_time_zone_is_read_from_its_iso_offset():
    request = parse_widget_request(
        {"widgetContext": {"timezone": {"label": "Asia/Kolkata", "offsetISO": "+05:30"}}}
    )

    assert request.zone == WidgetZone("Asia/Kolkata", timedelta(hours=5, minutes=30))
    assert parse_widget_request({}).zone == WidgetZone.utc()
    assert parse_widget_request({"describe": True}).describe


@pytest.mark.parametrize("offset", ["+5:30", "+25:00", "+05:75", 330, "UTC"])
def test_a_malformed_time_zone_offset_is_refused_naming_it(offset):
    with pytest.raises(WidgetRequestError, match="offsetISO"):
        parse_widget_request({"widgetContext": {"timezone": {"offsetISO": offset}}})
