"""The read commands: `sdc incidents` and `sdc holds` list, `sdc show` prints one incident (its
evidence and stored recommendation as the approval card words them, the decision, the audit
trail) or one storm hold."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Final

from sdc_remediation.infra.cli.audit import subject_verdict
from sdc_remediation.infra.cli.exits import EXIT_OK
from sdc_remediation.infra.cli.queries import OPEN_STATES
from sdc_remediation.infra.cli.render import (
    print_json,
    print_table,
    public_record,
    render_hold,
    render_incident,
    verdict_record,
    wants_json,
    when,
)
from sdc_remediation.infra.cli.wiring import Operator
from sdc_remediation.lambdas.models.incident import IncidentState
from sdc_remediation.lambdas.models.resume_point import ResumePoint
from sdc_remediation.lambdas.wording import cards
from sdc_remediation.lambdas.wording.card_lines import approvals_line

HOLD_PREFIX: Final = "hold-"
"""Storm hold ids start with it (`sdc_remediation.lambdas.logic.core.ids.hold_id`); `show` takes either kind of id."""


def cmd_incidents(op: Operator, args: argparse.Namespace) -> int:
    if args.state:
        states: Sequence[IncidentState] = [IncidentState(args.state)]
        nothing = f"no incidents in state {args.state}"
    elif args.all:
        states, nothing = list(IncidentState), "no incidents"
    else:
        states, nothing = OPEN_STATES, "no open incidents"
    found = op.queries().in_states(states)
    if wants_json(args):
        print_json([public_record(i) for i in found])
    elif not found:
        print(nothing)
    else:
        print_table(
            ("INCIDENT", "STATE", "CLUSTER", "INSTANCE", "OPENED", "METRIC"),
            [
                (
                    i.incident_id,
                    i.state.value,
                    i.cluster_name,
                    i.instance_id or "-",
                    when(i.created_at),
                    ",".join(i.metrics) or "-",
                )
                for i in found
            ],
        )
    return EXIT_OK


def cmd_holds(op: Operator, args: argparse.Namespace) -> int:
    found = [h for h in op.queries().storm_holds() if args.all or h.active]
    if wants_json(args):
        print_json([h.to_record() for h in found])
    elif not found:
        print("no storm holds" if args.all else "no active storm holds")
    else:
        print_table(
            ("HOLD", "STATE", "CLUSTER", "STARTED", "INSTANCES", "RESET BY"),
            [
                (
                    h.hold_id,
                    "active" if h.active else "reset",
                    h.cluster_name,
                    when(h.created_at),
                    str(len(h.instances)),
                    h.lifted_by or "-",
                )
                for h in found
            ],
        )
    return EXIT_OK


def cmd_show(op: Operator, args: argparse.Namespace) -> int:
    if args.incident.startswith(HOLD_PREFIX):
        return _show_hold(op, args)
    incident = op.incident(args.incident)
    entries = op.audit().entries(incident.incident_id)
    verdict = subject_verdict(
        op, incident.incident_id, entries, closed=incident.closed_at is not None
    )
    if wants_json(args):
        print_json(
            {
                "incident": public_record(incident),
                "approvals": approvals_line(incident),
                "recommendation": (
                    incident.recommendation.to_event() if incident.recommendation else None
                ),
                "resume": point.to_event() if (point := ResumePoint.of(incident.reports)) else None,
                "audit": [e.to_record() for e in entries],
                "chain": verdict_record(verdict),
            }
        )
    else:
        card = cards.approval_card(incident, op.deployment.settings(), max_bytes=None)
        print(render_incident(incident, card, entries, verdict))
    return EXIT_OK


def _show_hold(op: Operator, args: argparse.Namespace) -> int:
    hold = op.hold(args.incident)
    entries = op.audit().entries(hold.hold_id)
    verdict = subject_verdict(op, hold.hold_id, entries)
    if wants_json(args):
        print_json(
            {
                "hold": hold.to_record(),
                "audit": [e.to_record() for e in entries],
                "chain": verdict_record(verdict),
            }
        )
    else:
        print(render_hold(hold, entries, verdict))
    return EXIT_OK
