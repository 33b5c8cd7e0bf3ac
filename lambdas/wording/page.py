"""The dashboard's page of open incidents: the HTML a CloudWatch custom widget shows, worded
from the incident records alone (as the card is), never judged again.

Each incident: what and where, the evidence in one line, the stored recommendation with its
reasons, the approval deadline (in the dashboard's time zone and in UTC), the checkpoint to
resume from with the rollback and the exposure window (`sdc_remediation.lambdas.models.resume_point`), and, while
it awaits approval, an Approve and a Reject button, and a third, Reboot instead, where its
recovery path still allows a reboot (`cards.reboot_offered`, the card's rule). Incidents awaiting approval come first, the
soonest deadline on top; the others follow, oldest first.

The buttons decide nothing. A custom widget's `<cwdb-action action="call">` invokes a function
with the viewer's credentials, but the function then runs as its own role and learns only the
account, not who clicked: a decision made there would be the widget's, not the approver's. So
each button opens a popup (`action="html"`) with the decision to make as yourself: the
`sdc approve|reject|reboot` command, which signs a proof of who you are for `decide` to check against
`sdc:approvers`, and, where the deployment accepts console approvals, the approval state
machine's console page with the input to paste. Either way the decision goes through the
approval state machine and `decide`: the same rules, the same audit.

Everything an incident record holds is escaped (`html.escape`): reporter text, alarm text and
ids are data, never markup.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta, timezone
from enum import StrEnum
from html import escape
from typing import Final
from urllib.parse import quote

from sdc_remediation.lambdas.models.console import console_link, console_page, region_of
from sdc_remediation.lambdas.models.incident import Incident, IncidentState
from sdc_remediation.lambdas.models.payloads import Decision
from sdc_remediation.lambdas.models.settings import Settings
from sdc_remediation.lambdas.models.widget import WidgetZone
from sdc_remediation.lambdas.wording import card_lines, cards
from sdc_remediation.lambdas.wording.cards import approval_input, reboot_offered

BUTTONS: Final = (Decision.APPROVE, Decision.REJECT, Decision.REBOOT)
"""The decisions the page offers a button for, in order; the reboot only where the incident's
recovery path still allows one (`reboot_offered`)."""
BUTTON_LABELS: Final = {
    Decision.APPROVE: "Approve",
    Decision.REJECT: "Reject",
    Decision.REBOOT: "Reboot instead",
}
WHAT_EACH_DOES: Final = {
    Decision.APPROVE: "replaces the node (a new instance; this one's volumes are destroyed)",
    Decision.REJECT: "closes the incident and releases the node; nothing is replaced",
    Decision.REBOOT: "restarts the same instance rather than replacing it (its volumes kept, "
    "minutes; it stays isolated, is health-checked again and released if that passes; if "
    "not, you are asked again, without a second reboot)",
}

STYLE: Final = """<style>
.sdc-incident { border-top: 1px solid #d5dbdb; padding: 6px 0; }
.sdc-incident h4 { margin: 0 0 4px 0; }
.sdc-awaiting h4 { color: #d13212; }
.sdc-incident p { margin: 2px 0; }
.sdc-incident .btn { margin-right: 8px; }
.sdc-label { font-weight: bold; }
.sdc-links { margin: 4px 0; }
</style>"""

DESCRIBE: Final = """## Open SDC incidents

Lists the pipeline's open incidents, those awaiting approval first, with the evidence in one
line, the recommendation as the approval card states it, the approval deadline, the checkpoint
to resume from with the rollback and the exposure window. The Approve, Reject and (where a
reboot is still allowed) Reboot instead buttons show how to decide with your own AWS identity
(`sdc approve|reject|reboot`, or the approval state machine's console page where console
approvals are accepted): the widget itself decides nothing.

No parameters. Reads the incidents table's `by_state` index only."""
"""What the widget answers the console's `{"describe": true}`."""


def page_html(
    incidents: Iterable[Incident], settings: Settings, *, now: datetime, zone: WidgetZone
) -> str:
    """The widget's whole HTML: a heading with the count and the time, then each open
    incident (`ordered`)."""
    shown = ordered(i for i in incidents if not i.state.terminal)
    waiting = sum(1 for i in shown if i.state is IncidentState.AWAITING_APPROVAL)
    heading = (
        f"<h3>Open SDC incidents: {len(shown)} ({waiting} awaiting approval)</h3>"
        f"<p>as of {escape(_when(now, zone))}</p>"
    )
    if not shown:
        return f"{STYLE}{heading}<p>No open incidents.</p>"
    body = "".join(_incident_html(incident, settings, now, zone) for incident in shown)
    return f"{STYLE}{heading}{body}"


def ordered(incidents: Iterable[Incident]) -> list[Incident]:
    """Awaiting approval first, the oldest approval request (the soonest deadline) on top; the
    others after, oldest first."""

    def key(incident: Incident) -> tuple[bool, str, str]:
        waiting = incident.state is IncidentState.AWAITING_APPROVAL
        since = (incident.approval_requested_at if waiting else None) or incident.created_at
        return (not waiting, since, incident.incident_id)

    return sorted(incidents, key=key)


def deadline_text(incident: Incident, now: datetime, zone: WidgetZone) -> str:
    """`expires 14:05 UTC+02:00 (2026-11-30 12:05 UTC), in 42 min`, or that it has passed: the
    deadline `request_approval` recorded (`Incident.approval_deadline`), the one the card names."""
    if incident.approval_deadline is None:
        return "unknown (no approval request recorded)"
    expires = incident.approval_deadline.instant
    left = expires - now
    when = _when(expires, zone)
    if left <= timedelta(0):
        return f"expired at {when}: a decision now is refused"
    minutes = int(left.total_seconds() // 60)
    return f"expires {when}, in {minutes // 60} h {minutes % 60} min"


def evidence_summary(incident: Incident) -> str:
    """The evidence in one line: the alarm metrics, the reports, the deep health check."""
    metrics = ", ".join(incident.metrics) or "none"
    reports = len(incident.reports)
    return (
        f"metrics: {metrics}; reports: {reports}; "
        f"deep health check: {card_lines.health_summary(incident)}"
    )


def _incident_html(incident: Incident, settings: Settings, now: datetime, zone: WidgetZone) -> str:
    waiting = incident.state is IncidentState.AWAITING_APPROVAL
    where = (
        f"job {incident.job_name or 'unknown'} on {incident.cluster_name}"
        if incident.is_job
        else f"{incident.instance_id} on {incident.cluster_name}"
    )
    rows = [
        ("State", incident.state.value),
        ("Open for", open_for(incident, now)),
        ("Isolation", card_lines.isolation_summary(incident)),
        ("Evidence", evidence_summary(incident)),
        (
            "Recommendation",
            card_lines.recommendation_heading(incident.recommendation).removeprefix(
                card_lines.RECOMMENDATION_HEADING
            ),
        ),
        (
            "Why",
            "; ".join(
                line.strip(" -") for line in card_lines.reason_lines(incident.recommendation)
            ),
        ),
    ]
    if waiting:
        rows.append(("Deadline", deadline_text(incident, now, zone)))
        if tally := card_lines.approvals_line(incident, settings.approvals_required):
            rows.append(("Approvals so far", tally))
    rows.extend(_resume_rows(incident))
    css = "sdc-incident sdc-awaiting" if waiting else "sdc-incident"
    return (
        f'<div class="{css}" data-incident="{escape(incident.incident_id)}">'
        f"<h4>{escape(where)}: {escape(incident.incident_id)}</h4>"
        + "".join(
            f'<p><span class="sdc-label">{escape(label)}:</span> {escape(text)}</p>'
            for label, text in rows
        )
        + _links(incident, settings)
        + (_buttons(incident, settings) if waiting else "")
        + "</div>"
    )


def open_for(incident: Incident, now: datetime) -> str:
    """How long the incident has been open: `2 h 05 min`, `3 d 4 h`, `under a minute`."""
    try:
        opened = datetime.fromisoformat(incident.created_at).astimezone(UTC)
    except ValueError:
        return "unknown (no opening time recorded)"
    minutes = max(int((now - opened).total_seconds() // 60), 0)
    days, hours = minutes // (24 * 60), minutes // 60 % 24
    if days:
        return f"{days} d {hours} h"
    if minutes >= 60:
        return f"{minutes // 60} h {minutes % 60:02d} min"
    return f"{minutes} min" if minutes else "under a minute"


class PageLink(StrEnum):
    """The links each incident has, in order (a link with nowhere to go says so instead); the
    value is the link's `data-link`."""

    CARD = "card"
    AUDIT_TRAIL = "audit trail"
    EXECUTION = "execution"
    NODE = "node"
    METRICS = "metrics"


POPUP_LINKS: Final = (PageLink.CARD, PageLink.AUDIT_TRAIL)
"""The links that open a popup on the page rather than a console page."""


def links(incident: Incident, settings: Settings) -> dict[PageLink, str | None]:
    """Where each `PageLink` goes: a console page (None: there is none to go to). The card and
    the audit trail open in a popup on the page itself (`_links`)."""
    region = region_of(settings.topic_arn) or region_of(incident.execution_arn) or "us-east-1"
    isolation = incident.isolation
    node = next(iter(isolation.nodes.values()), None) if isolation else None
    telemetry = settings.telemetry.get(incident.cluster_name)
    dashboard = (incident.telemetry and incident.telemetry.dashboard) or (
        telemetry.dashboard if telemetry else None
    )
    return {
        PageLink.CARD: None,
        PageLink.AUDIT_TRAIL: console_page(
            region, "dynamodbv2", f"item-explorer?table={quote(settings.audit_table)}"
        ),
        PageLink.EXECUTION: console_link(incident.execution_arn),
        PageLink.NODE: (
            console_page(
                region,
                "eks",
                f"/clusters/{quote(isolation.eks_cluster)}/nodes/{quote(node.node_name)}",
            )
            if isolation and isolation.eks_cluster and node and node.node_name
            else console_page(
                region, "sagemaker", f"/cluster-management/{quote(incident.cluster_name)}"
            )
        ),
        PageLink.METRICS: dashboard
        or console_page(
            region,
            "cloudwatch",
            f"metricsV2?search={quote(incident.instance_id or incident.cluster_name)}",
        ),
    }


def _links(incident: Incident, settings: Settings) -> str:
    """The incident's links: the card and its audit trail in a popup, the others to their
    console page."""
    found = links(incident, settings)
    parts = []
    for name in PageLink:
        label = escape(name.capitalize())
        href = found[name]
        if name is PageLink.CARD:
            card = cards.approval_card(incident, settings)
            # its WHAT TO DO is the notice's; on the page the buttons say how to decide
            text = cards.render(s for s in card.sections if s is not card.what_to_do)
            popup = f"<h4>Approval card</h4><pre>{escape(text)}</pre>"
        elif name is PageLink.AUDIT_TRAIL:
            popup = (
                f"<h4>Audit trail of {escape(incident.incident_id)}</h4><p>Each step, hash "
                f"chained, with <code>sdc show {escape(shlex.quote(incident.incident_id))}</code>"
                f' (it verifies the chain), or the <a href="{escape(href or "")}" '
                f'target="_blank">audit table</a>, key <code>{escape(incident.incident_id)}</code>.'
                "</p>"
            )
        else:
            parts.append(
                f'<a class="sdc-link" data-link="{escape(name)}" href="{escape(href)}" '
                f'target="_blank">{label}</a>'
                if href
                else f'<span class="sdc-link" data-link="{escape(name)}">{label}: none yet</span>'
            )
            continue
        parts.append(
            f'<a class="sdc-link" data-link="{escape(name)}">{label}</a>'
            f'<cwdb-action action="html" display="popup">{popup}</cwdb-action>'
        )
    return f'<div class="sdc-links">{" | ".join(parts)}</div>'


def _resume_rows(incident: Incident) -> list[tuple[str, str]]:
    """The checkpoint to resume from, then the rollback and the exposure window, as the card
    words them (`card_lines.resume_lines`)."""
    exposure = [line.strip() for line in card_lines.exposure_lines(incident)]
    resume = [line.strip() for line in card_lines.resume_lines(incident)]
    rows = [
        ("Resume from", line.removeprefix("Resume from: "))
        for line in resume
        if line not in exposure
    ]
    rows.extend(("Exposure", line) for line in exposure)
    return rows or [("Exposure", "unknown: no report places a suspect window")]


def _buttons(incident: Incident, settings: Settings) -> str:
    """In a `div`, never a `p`: a popup's own blocks (`h4`, `p`, `pre`) would close a `p` and
    spill out of their `cwdb-action` (the HTML parser ends a `p` at the next block)."""
    offered = [d for d in BUTTONS if d is not Decision.REBOOT or reboot_offered(incident)]
    buttons = "".join(_button(incident, d, settings) for d in offered)
    return f'<div class="sdc-buttons">{buttons}</div>'


def _button(incident: Incident, decision: Decision, settings: Settings) -> str:
    """A button, and the popup it opens: how to make this decision as yourself."""
    primary = " btn-primary" if decision is Decision.APPROVE else ""
    return (
        f'<a class="btn{primary}" data-decision="{decision.value}">'
        f"{BUTTON_LABELS[decision]}</a>"
        f'<cwdb-action action="html" display="popup">'
        f"{_how_to_decide(incident, decision, settings)}</cwdb-action>"
    )


def _how_to_decide(incident: Incident, decision: Decision, settings: Settings) -> str:
    command = f"sdc {decision.value} {shlex.quote(incident.incident_id)} -m '<why>'"
    parts = [
        f"<h4>{BUTTON_LABELS[decision]} {escape(incident.incident_id)}</h4>",
        f"<p>{BUTTON_LABELS[decision]} {escape(WHAT_EACH_DOES[decision])}. Decide as yourself, "
        "with your own AWS credentials; this widget decides nothing (it runs as its own role "
        "and cannot tell who you are).</p>",
        f"<p>From a shell: <code>{escape(command)}</code> (it signs a proof of who you are, "
        "which decide checks against the allowed approvers, and waits for the outcome).</p>",
    ]
    parts.extend(_console_choice(incident, decision, settings))
    if settings.approvers:
        parts.append(f"<p>Allowed approvers: {escape(', '.join(settings.approvers))}</p>")
    return "".join(parts)


def _console_choice(incident: Incident, decision: Decision, settings: Settings) -> Sequence[str]:
    """The approval state machine's console page and the input to paste, where console
    approvals are accepted; otherwise why not."""
    if settings.needs_identity_proof:
        return (
            "<p>A console approval carries no proof of who started it and is refused in this "
            "deployment: use the command.</p>",
        )
    link = console_link(settings.approval_state_machine_arn)
    start = (
        f'<a href="{escape(link)}" target="_blank">the approval state machine</a>'
        if link
        else "the approval state machine (APPROVAL_STATE_MACHINE_ARN not configured)"
    )
    payload = json.dumps(approval_input(incident.incident_id, decision))
    return (
        f"<p>Or in the console: open {start}, choose Start execution and paste this input "
        f"(write your reason in comment):</p><pre>{escape(payload)}</pre>",
    )


def _when(moment: datetime, zone: WidgetZone) -> str:
    """`14:05 Europe/Berlin (2026-11-30 12:05 UTC)`; only the UTC time for a UTC dashboard."""
    utc = moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    if not zone.offset:
        return utc
    local = moment.astimezone(timezone(zone.offset)).strftime("%Y-%m-%d %H:%M")
    return f"{local} {zone.label} ({utc})"
