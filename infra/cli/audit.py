"""`sdc audit verify`: walk the audit log's hash chains against the audit anchor and name the
first bad entry of every broken one."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from sdc_remediation.infra.cli.exits import EXIT_FAILED, EXIT_OK
from sdc_remediation.infra.cli.render import describe, print_json, verdict_record, wants_json
from sdc_remediation.infra.cli.wiring import Operator
from sdc_remediation.lambdas.logic.core.audit import ChainVerdict, verify_subjects
from sdc_remediation.lambdas.models.audit import AnchorRecord, AuditEntry
from sdc_remediation.lambdas.models.incident import IncidentState


def cmd_audit_verify(op: Operator, args: argparse.Namespace) -> int:
    chains: dict[str, list[AuditEntry]]
    anchor = op.anchor()
    anchored: list[AnchorRecord] | None = None
    closed: set[str] = set()
    if args.all:
        chains = op.chains().all_chains()
        for incident in op.queries().in_states(IncidentState):
            chains.setdefault(incident.incident_id, [])  # an incident without a single entry
            if incident.closed_at is not None:
                closed.add(incident.incident_id)
        anchored = anchor.records() if anchor is not None else None
    else:
        chains = {}
        anchored = [] if anchor is not None else None
        for subject in dict.fromkeys(args.incidents):
            entries = op.audit().entries(subject)
            found = anchor.records(subject) if anchor is not None else []
            if anchored is not None:
                anchored.extend(found)
            known = op.incidents().get(subject)
            if not entries and not found and known is None and op.guard().get_hold(subject) is None:
                op.incident(subject)  # unknown everywhere: exit 2
            if known is not None and known.closed_at is not None:
                closed.add(subject)
            chains[subject] = entries
    verdicts = verify_subjects(chains, anchored, closed=closed, now=datetime.now(UTC))
    broken = [s for s, v in verdicts.items() if not v.ok]
    if wants_json(args):
        print_json(
            {
                "ok": not broken,
                "anchored": anchored is not None,
                "chains": [{"subject": s, **verdict_record(v)} for s, v in verdicts.items()],
            }
        )
    else:
        for subject, verdict in verdicts.items():
            print(f"{'verified' if verdict.ok else 'BROKEN':<9} {subject}  {describe(verdict)}")
        print(
            f"chains checked: {len(verdicts)}; verified {len(verdicts) - len(broken)}, "
            f"broken {len(broken)}"
            + (
                ""
                if anchored is not None
                else "; no audit anchor: only each chain's order is checked"
            )
        )
    return EXIT_FAILED if broken else EXIT_OK


def subject_verdict(
    op: Operator, subject: str, entries: list[AuditEntry], *, closed: bool = False
) -> ChainVerdict:
    """One subject's chain, against the anchor when the deployment has one (`sdc show`)."""
    anchor = op.anchor()
    anchored = anchor.records(subject) if anchor is not None else None
    verdicts = verify_subjects(
        {subject: entries},
        anchored,
        closed=[subject] if closed else [],
        now=datetime.now(UTC),
    )
    return verdicts[subject]
