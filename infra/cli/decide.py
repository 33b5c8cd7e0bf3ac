"""`sdc approve`, `reboot`, `reject`, `reset` and `proceed`: a decision given the way the console
gives it,
as an execution of the approval state machine, so its checks and its audit entry are the same."""

from __future__ import annotations

import argparse
import getpass
import re
import secrets
from datetime import UTC, datetime

from botocore.exceptions import BotoCoreError, ClientError

from sdc_remediation.infra.cli.exits import EXIT_FAILED, EXIT_OK, CliError
from sdc_remediation.infra.cli.render import print_json, render_decision, wants_json
from sdc_remediation.infra.cli.wiring import Operator
from sdc_remediation.lambdas.adapters.identity import sign_identity_proof
from sdc_remediation.lambdas.logic.safety.decisions import approval_binding
from sdc_remediation.lambdas.models.payloads import Decision
from sdc_remediation.lambdas.wording import cards


def cmd_decide(op: Operator, args: argparse.Namespace) -> int:
    decision = Decision(args.decision)
    # A reset names a storm hold, the other decisions an incident: unknown ids stop here.
    if decision is Decision.RESET:
        subject = op.hold(args.incident).hold_id
    else:
        subject = op.incident(args.incident).incident_id
    # The input the card tells approvers to paste into the console, with the comment filled in,
    # and a proof of who decides, signed with the caller's own credentials (decide redeems it).
    payload = {
        **cards.approval_input(subject, decision),
        "comment": args.comment,
        "identity_proof": identity_proof(op, subject, decision),
    }
    name = execution_name(_caller())
    approvals = op.approvals()
    started = approvals.start(name, payload)
    if started.already_existed:
        raise CliError(f"an approval execution named {name} exists already: run the command again")
    ended = approvals.wait(started.arn, timeout=args.timeout)
    accepted = ended.status == "SUCCEEDED"
    if wants_json(args):
        shown = dict(payload)
        shown.pop("identity_proof", None)
        print_json(
            {
                **shown,
                "execution_name": name,
                "execution_arn": ended.arn,
                "status": ended.status,
                "accepted": accepted,
                "reason": None if accepted else ended.reason,
                **{
                    key: ended.output.get(key)
                    for key in ("approvals", "waiting", "principal")
                    if isinstance(ended.output, dict) and key in ended.output
                },
            }
        )
    else:
        print(render_decision(subject, decision, ended, args.timeout))
    return EXIT_OK if accepted else EXIT_FAILED


def identity_proof(op: Operator, subject: str, decision: Decision) -> str:
    """A presigned sts:GetCallerIdentity request bound to this decision (no call is made)."""
    binding = approval_binding(op.deployment.approval_state_machine_arn, subject, decision.value)
    try:
        return sign_identity_proof(op.sts_signer(), binding)
    except (BotoCoreError, ClientError) as err:
        raise CliError(f"cannot sign the identity proof with your credentials: {err}") from err


def execution_name(user: str, now: datetime | None = None) -> str:
    """`cli-<user>-<UTC time>-<random>`: who started the approval, readable in the execution
    list and in the audit entry's actor (CloudTrail has the IAM principal). At most 80
    characters of `[A-Za-z0-9_-]`, as Step Functions requires."""
    safe = re.sub(r"[^A-Za-z0-9_-]+", "-", user).strip("-")[:40] or "unknown"
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    return f"cli-{safe}-{stamp}-{secrets.token_hex(2)}"


def _caller() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name and no passwd entry (some containers)
        return "unknown"
