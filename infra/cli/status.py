"""`sdc status`: the pipeline on one screen. Open incidents by state, approvals waiting with
their age, storm holds and the incidents held on arrival lately, the pause switch and dry run,
the last failed incidents and the dead-letter queues' depth."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from sdc_remediation.infra.cli import deployment
from sdc_remediation.infra.cli.exits import EXIT_OK
from sdc_remediation.infra.cli.queries import OPEN_STATES
from sdc_remediation.infra.cli.render import print_json, render_status, wants_json
from sdc_remediation.infra.cli.wiring import Operator
from sdc_remediation.lambdas.logic.core.lifecycle import awaiting_reconciliation
from sdc_remediation.lambdas.models.errors import AwsError
from sdc_remediation.lambdas.models.guard import reads_as_paused
from sdc_remediation.lambdas.models.incident import Incident, IncidentState
from sdc_remediation.lambdas.wording.card_lines import advice_summary, deadline_words

RECENT_HOLDS: Final = timedelta(hours=24)
"""`status` counts the incidents held on arrival within this window."""
LAST_FAILURES: Final = 5
"""`status` shows this many of the newest failed incidents."""


def cmd_status(op: Operator, args: argparse.Namespace) -> int:
    now = datetime.now(UTC)
    report = status_report(op, now)
    if wants_json(args):
        print_json(report)
    else:
        print(render_status(report, op.deployment.source, now, RECENT_HOLDS))
    return EXIT_OK


def status_report(op: Operator, now: datetime) -> dict[str, Any]:
    """Everything `status` shows, as plain data (its `--json`)."""
    queries = op.queries()
    open_incidents = queries.in_states(OPEN_STATES)
    waiting = [
        i for i in open_incidents if i.state is IncidentState.AWAITING_APPROVAL and not i.decision
    ]
    since = (now - RECENT_HOLDS).isoformat()
    held = [i for i in queries.by_state(IncidentState.HELD) if i.created_at >= since]
    failed = sorted(
        queries.by_state(IncidentState.FAILED),
        key=lambda i: i.closed_at or i.updated_at,
        reverse=True,
    )[:LAST_FAILURES]
    return {
        "open": {
            state.value: [i.incident_id for i in open_incidents if i.state is state]
            for state in OPEN_STATES
        },
        "approvals_waiting": [
            {
                "incident_id": i.incident_id,
                "cluster_name": i.cluster_name,
                "instance_id": i.instance_id,
                "requested_at": i.approval_requested_at,
                "waiting_seconds": _seconds_since(i.approval_requested_at or i.updated_at, now),
                "expires_at": i.approval_deadline.expires_at if i.approval_deadline else None,
                "deadline": (deadline_words(i.approval_deadline) if i.approval_deadline else None),
                "seconds_left": (
                    i.approval_deadline.seconds_left(now) if i.approval_deadline else None
                ),
                "card_undelivered": i.card_undelivered,
                "advice": i.recommendation.advice.value if i.recommendation else None,
                "tier": advice_summary(i.recommendation),
            }
            for i in waiting
        ],
        "cards_undelivered": [i.incident_id for i in waiting if i.card_undelivered],
        "kept_for_reconciliation": [
            {
                "incident_id": i.incident_id,
                "instance_id": i.instance_id,
                "since": i.recovery_unknown,
            }
            for i in queries.by_state(IncidentState.FAILED)
            if awaiting_reconciliation(i)
        ],
        "storm_holds": [h.to_record() for h in queries.storm_holds() if h.active],
        "held_recently": [
            {
                "incident_id": i.incident_id,
                "kind": i.hold_kind,
                "mute_rule": i.hold.mute_rule if i.hold else None,
                "created_at": i.created_at,
            }
            for i in held
        ],
        "pause_switch": _pause_state(op),
        "dry_run": op.deployment.optional(deployment.DRY_RUN),
        "last_failures": [
            {
                "incident_id": i.incident_id,
                "closed_at": i.closed_at,
                "why": _failure_summary(i),
            }
            for i in failed
        ],
        "dead_letter_queues": _queue_depths(op),
    }


def _pause_state(op: Operator) -> dict[str, Any]:
    switch = op.pause_switch()
    if switch is None:
        return {"parameter": None, "value": None, "paused": False, "error": None}
    try:
        value = switch.read()
    except AwsError as err:
        # The functions count an unreadable switch as paused; say so rather than fail.
        return {
            "parameter": switch.parameter_name,
            "value": None,
            "paused": True,
            "error": str(err),
        }
    return {
        "parameter": switch.parameter_name,
        "value": value,
        "paused": reads_as_paused(value),
        "error": None,
    }


def _queue_depths(op: Operator) -> dict[str, int | None]:
    depths: dict[str, int | None] = {}
    queues = op.queues()
    for output, label in deployment.DEAD_LETTER_QUEUES.items():
        url = op.deployment.optional(output)
        if url is None:
            continue
        try:
            depths[label] = queues.depth(url)
        except AwsError:
            depths[label] = None  # shown as unknown; the rest of the screen still helps
    return depths


def _failure_summary(incident: Incident) -> str:
    error = incident.error
    kind, message = (error.kind, error.message) if error else (None, None)
    text = ": ".join(str(part) for part in (kind, message) if part) or incident.reason or "-"
    return " ".join(text.split())[:160]


def _seconds_since(value: str | None, now: datetime) -> int | None:
    if not value:
        return None
    try:
        then = datetime.fromisoformat(value)
    except ValueError:
        return None
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    return max(0, int((now - then).total_seconds()))
