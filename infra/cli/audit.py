"""`sdc audit verify`: walk the audit log's hash chains and name the first broken link."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from infra.cli.exits import EXIT_FAILED, EXIT_OK
from infra.cli.render import describe, print_json, verdict_record
from infra.cli.wiring import Operator
from lambdas.logic.audit import ChainVerdict, verify_chain
from lambdas.models.audit import AuditEntry
from lambdas.models.incident import IncidentState


def cmd_audit_verify(op: Operator, args: argparse.Namespace) -> int:
    chains: dict[str, list[AuditEntry]]
    if args.all:
        chains = op.chains().all_chains()
        for incident in op.queries().in_states(IncidentState):
            chains.setdefault(incident.incident_id, [])  # an incident without a single entry
    else:
        chains = {}
        for subject in dict.fromkeys(args.incidents):
            entries = op.audit().entries(subject)
            if not entries:
                op.incident(subject)  # unknown: exit 2; known without entries: broken
            chains[subject] = entries
    verdicts = {subject: chain_verdict(entries) for subject, entries in chains.items()}
    broken = [s for s, v in verdicts.items() if not v.ok]
    if args.json:
        print_json(
            {
                "ok": not broken,
                "chains": [{"subject": s, **verdict_record(v)} for s, v in verdicts.items()],
            }
        )
    else:
        for subject, verdict in verdicts.items():
            print(f"{'verified' if verdict.ok else 'BROKEN':<9} {subject}  {describe(verdict)}")
        print(
            f"chains checked: {len(verdicts)}; verified {len(verdicts) - len(broken)}, broken {len(broken)}"
        )
    return EXIT_FAILED if broken else EXIT_OK


def chain_verdict(entries: Sequence[AuditEntry]) -> ChainVerdict:
    """`verify_chain`, and an incident without a single entry is broken too (every incident's
    first step is audited)."""
    if not entries:
        return ChainVerdict(False, 0, 1, "no audit entries at all")
    return verify_chain(entries)
