"""The dashboard's page on moto and in a browser: the handler reads the open incidents through
the `by_state` index and answers HTML; headless Chromium renders that HTML, screenshots it, and
its DOM holds the incident and its buttons (approve, reject, and reboot instead where a
reboot is still allowed)."""

from __future__ import annotations

import dataclasses
from html.parser import HTMLParser
from pathlib import Path

import pytest

from sdc_remediation.lambdas.handlers import incidents_page
from sdc_remediation.lambdas.models.deadline import ApprovalDeadline
from sdc_remediation.lambdas.models.incident import Incident, IncidentState
from sdc_remediation.lambdas.models.recovery import MAX_REBOOTS, RebootRecord
from tests.integration.chromium import ChromiumUnavailable, render
from tests.integration.conftest import Aws, invoke
from tests.unit.world import TOKEN, World

WIDGET_EVENT = {
    "widgetContext": {
        "dashboardName": "SdcRemediation-us-west-2",
        "widgetId": "widget-1",
        "accountId": "123456789012",
        "timezone": {"label": "Europe/Berlin", "offsetISO": "+01:00", "offsetInMinutes": -60},
        "params": {},
        "width": 1200,
        "height": 600,
    }
}


def awaiting_incident() -> Incident:
    world = World()
    world.store_fixture_report()
    return world.incident(world.awaiting_approval())


def stored(aws: Aws, incident: Incident) -> Incident:
    aws.incidents.create(incident)
    return incident


class Buttons(HTMLParser):
    """From a DOM: per incident (`data-incident`), the text of its `a.btn` elements, and the
    text shown outside every `cwdb-action` (what a viewer sees before clicking)."""

    def __init__(self) -> None:
        super().__init__()
        self.by_incident: dict[str, list[str]] = {}
        self.visible: list[str] = []
        self._incident: str | None = None
        self._in_button = False
        self._in_action = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "div" and found.get("data-incident"):
            self._incident = found["data-incident"]
            self.by_incident[self._incident] = []
        self._in_action += tag == "cwdb-action"
        self._in_button = tag == "a" and "btn" in (found.get("class") or "").split()

    def handle_endtag(self, tag: str) -> None:
        self._in_action -= tag == "cwdb-action"

    def handle_data(self, data: str) -> None:
        if not self._in_action:
            self.visible.append(data)
        if self._in_button and self._incident and data.strip():
            self.by_incident[self._incident].append(data.strip())
            self._in_button = False


def test_the_handler_lists_the_open_incidents_and_never_their_task_token(aws):
    waiting = stored(aws, awaiting_incident())
    aws.incidents.keep_task_token(waiting.incident_id, TOKEN)

    html = invoke(incidents_page, WIDGET_EVENT)

    assert waiting.incident_id in html
    assert "Open SDC incidents: 1 (1 awaiting approval)" in html
    assert TOKEN not in html


def test_the_handler_lists_no_closed_incident(aws):
    closed = awaiting_incident()
    closed.state = IncidentState.REPLACED
    stored(aws, closed)

    html = invoke(incidents_page, WIDGET_EVENT)

    assert closed.incident_id not in html
    assert "No open incidents." in html


def test_the_handler_answers_the_console_s_describe_with_the_widget_s_documentation(aws):
    assert invoke(incidents_page, {"describe": True}).startswith("## Open SDC incidents")


def test_chromium_renders_the_incident_and_its_approve_reject_and_reboot_instead_buttons(
    aws, tmp_path, capsys, monkeypatch
):
    incident = awaiting_incident()
    assert incident.approval_requested_at is not None
    # the deadline recorded when its approval was asked for a day's timeout: the page reads it
    deadline = ApprovalDeadline.after(incident.approval_requested_at, 86_400, "UTC")
    waiting = stored(aws, dataclasses.replace(incident, approval_deadline=deadline))
    html = invoke(incidents_page, WIDGET_EVENT)

    rendered = render(html, Path(tmp_path))
    with capsys.disabled():
        print(f"\nincidents page screenshot: {rendered.screenshot}")

    buttons = Buttons()
    buttons.feed(rendered.dom)
    assert buttons.by_incident == {waiting.incident_id: ["Approve", "Reject", "Reboot instead"]}
    shown = " ".join(buttons.visible)
    assert "REPLACE AFTER REVIEW" in shown and "exposure window: steps 21-30" in shown
    assert "expired at 2026-12-01 09:15 Europe/Berlin (2026-12-01 08:15 UTC)" in shown
    assert "From a shell" not in shown, "a popup's content spilled out of its cwdb-action"
    assert rendered.screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_chromium_shows_no_reboot_button_for_an_incident_already_rebooted(aws, tmp_path):
    incident = awaiting_incident()
    rebooted = stored(aws, dataclasses.replace(incident, reboot=RebootRecord(count=MAX_REBOOTS)))

    rendered = render(invoke(incidents_page, WIDGET_EVENT), Path(tmp_path))

    buttons = Buttons()
    buttons.feed(rendered.dom)
    assert buttons.by_incident == {rebooted.incident_id: ["Approve", "Reject"]}


@pytest.mark.parametrize("hostile", ["<script>document.title='owned'</script>", "<b>bold</b>"])
def test_chromium_shows_hostile_incident_text_as_text(aws, tmp_path, hostile):
    incident = awaiting_incident()
    incident.scope = incident.scope.JOB
    incident.job_name = hostile
    stored(aws, incident)

    rendered = render(invoke(incidents_page, WIDGET_EVENT), Path(tmp_path))

    assert "<script>" not in rendered.dom and "<b>bold" not in rendered.dom
    assert "<title>SDC incidents widget</title>" in rendered.dom


def test_without_chromium_the_render_fails_naming_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))

    with pytest.raises(ChromiumUnavailable, match="apt-get install -y chromium"):
        render("<p>x</p>", Path(tmp_path))


def test_a_chromium_that_cannot_start_fails_the_render_with_its_reason(tmp_path, monkeypatch):
    broken = tmp_path / "bin" / "chromium"
    broken.parent.mkdir()
    broken.write_text("#!/bin/sh\necho 'cannot open display' >&2\nexit 3\n")
    broken.chmod(0o755)
    monkeypatch.setenv("PATH", str(broken.parent))

    with pytest.raises(ChromiumUnavailable, match=r"exit 3\): cannot open display"):
        render("<p>x</p>", Path(tmp_path))
