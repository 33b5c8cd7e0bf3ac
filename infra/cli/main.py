"""`sdc`'s command line: the global options, each command's arguments, and `main`, the console
script, which runs the chosen command and turns the errors an operator can act on into one line
and exit status 2."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import boto3

from sdc_remediation.infra.cli.audit import cmd_audit_verify
from sdc_remediation.infra.cli.decide import cmd_decide
from sdc_remediation.infra.cli.deployment import DEFAULT_STACK
from sdc_remediation.infra.cli.exits import EXIT_ERROR, error_message
from sdc_remediation.infra.cli.incidents import cmd_holds, cmd_incidents, cmd_show
from sdc_remediation.infra.cli.page import cmd_page
from sdc_remediation.infra.cli.reconcile import cmd_reconcile
from sdc_remediation.infra.cli.render import Output
from sdc_remediation.infra.cli.replay import cmd_replay_spool
from sdc_remediation.infra.cli.report import DEFAULT_SINCE, cmd_report, period
from sdc_remediation.infra.cli.status import cmd_status
from sdc_remediation.infra.cli.wiring import Operator, default_session
from sdc_remediation.lambdas.models.incident import IncidentState
from trainer_emitter import spool
from trainer_emitter.version import __version__

DEFAULT_APPROVAL_TIMEOUT: Final = 60.0


class _Parser(argparse.ArgumentParser):
    """No abbreviated long options: `--output` must never be read as `--outputs`. The
    commands' parsers are of this class too (argparse makes them of their parent's)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)


def _output(value: str) -> Output:
    try:
        return Output(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not an output: {' or '.join(Output)}"
        ) from None


def _global_options(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """The deployment and connection options. Given to the main parser with their defaults and
    to every command with none, so they work before or after the command name."""

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    group = parser.add_argument_group("global options (before or after the command)")
    group.add_argument(
        "--region",
        default=default(os.environ.get("AWS_REGION")),
        help="AWS region (default: the profile's, AWS_REGION or AWS_DEFAULT_REGION)",
    )
    group.add_argument("--profile", default=default(None), help="AWS named profile")
    group.add_argument(
        "--endpoint-url",
        metavar="URL",
        default=default(os.environ.get("SDC_ENDPOINT_URL")),
        help="send every AWS call here, e.g. a local moto server (default: $SDC_ENDPOINT_URL)",
    )
    group.add_argument(
        "--stack",
        metavar="NAME",
        default=default(os.environ.get("SDC_STACK") or None),
        help="the deployed stack that holds the pipeline: the standalone one, or a stack of your "
        "own app that holds the SdcRemediation construct; with --outputs, the stack to pick in "
        f"the file (default: $SDC_STACK, else {DEFAULT_STACK}; with --outputs, the file's only "
        "deployment)",
    )
    group.add_argument(
        "--outputs",
        metavar="FILE",
        default=default(os.environ.get("SDC_OUTPUTS")),
        help="read those Outputs from a JSON file instead of CloudFormation (the file `cdk "
        "deploy --outputs-file` writes, or one stack's outputs; default: $SDC_OUTPUTS)",
    )
    group.add_argument(
        "-o",
        "--output",
        type=_output,
        metavar="{" + ",".join(Output) + "}",
        default=default(Output.TEXT),
        help="what to print: text for people, json for machines (default: text)",
    )


def _json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json",
        dest="output",
        action="store_const",
        const=Output.JSON,
        default=argparse.SUPPRESS,
        help="the same as --output json",
    )


def _comment(value: str) -> str:
    if not value.strip():
        raise argparse.ArgumentTypeError("the comment is the audit log's reason: give one")
    return value


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"not a positive number of seconds: {value!r}")
    return seconds


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="sdc",
        description="Operate the SDC remediation pipeline: list and inspect incidents, approve "
        "or reject them, verify the audit log, re-send spooled reports.",
        epilog="Exit status: 0 done; 1 what was checked or asked for did not happen (broken "
        "chain, refused decision, report still pending); 2 the command could not run (usage, "
        "credentials, stack, unknown incident). Reference: docs/operate.md.",
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {__version__}", help="print the version"
    )
    _global_options(parser, suppress=False)
    common = _Parser(add_help=False)
    _global_options(common, suppress=True)
    commands = parser.add_subparsers(
        title="commands", dest="command", required=True, metavar="COMMAND"
    )

    status = commands.add_parser(
        "status",
        parents=[common],
        help="one screen: open incidents, approvals waiting, holds, pause, dry run, failures",
        description="The pipeline at a glance: open incidents by state, approvals waiting "
        "with their age, active storm holds and incidents held on arrival in the last 24 h, "
        "the pause switch and dry-run setting, the last failed incidents and the dead-letter "
        "queues' depth. Reads the incidents table (by_state index, and a Scan for the storm "
        "holds), the pause switch parameter and the two queues.",
    )
    _json_option(status)
    status.set_defaults(run=cmd_status)

    incidents = commands.add_parser(
        "incidents",
        parents=[common],
        help="list incidents (the open ones unless --all or --state)",
        description="List incidents, oldest first: id, state, cluster, instance, when opened, "
        "metrics. Open = opened, health_check, awaiting_approval or replacing.",
    )
    which = incidents.add_mutually_exclusive_group()
    which.add_argument("--all", action="store_true", help="every incident, closed ones too")
    which.add_argument(
        "--state",
        choices=[s.value for s in IncidentState],
        metavar="STATE",
        help=f"only incidents in STATE: {', '.join(s.value for s in IncidentState)}",
    )
    _json_option(incidents)
    incidents.set_defaults(run=cmd_incidents)

    holds = commands.add_parser(
        "holds",
        parents=[common],
        help="list storm holds (the active ones unless --all)",
        description="List storm holds, oldest first: id, active or reset, cluster, when it "
        "started, how many instances it flagged, who reset it. Scans the incidents table "
        "(dynamodb:Scan). Lift one with `sdc reset HOLD -m COMMENT`.",
    )
    holds.add_argument("--all", action="store_true", help="reset holds too")
    _json_option(holds)
    holds.set_defaults(run=cmd_holds)

    show = commands.add_parser(
        "show",
        parents=[common],
        help="one incident: evidence, recommendation, decision, audit trail",
        description="One incident: its evidence, the deep health check, the recommendation, "
        "the decision, the replacement, the audit trail and whether its hash chain verifies.",
    )
    show.add_argument("incident", metavar="INCIDENT", help="incident id")
    _json_option(show)
    show.set_defaults(run=cmd_show)

    page = commands.add_parser(
        "page",
        parents=[common],
        help="render the dashboard's page of open incidents to an HTML file (and a PNG)",
        description="The dashboard's custom widget (what the incidents_page function answers), "
        "rendered from the incidents table by the same code: each open incident with its age, "
        "isolation (cordon or drain), evidence, recommendation, deadline and links (card, "
        "audit trail, execution, node, metrics). Writes OUT and, where headless Chromium is "
        "installed, a screenshot beside it (OUT with .png). Reads the by_state index only.",
    )
    page.add_argument(
        "--out",
        type=Path,
        default=Path(".drill/page.html"),
        metavar="OUT",
        help="the HTML file to write (default .drill/page.html)",
    )
    page.add_argument("--no-png", action="store_true", help="the HTML only, no screenshot")
    page.set_defaults(run=cmd_page)

    for decision, summary, subject in (
        ("approve", "approve replacing the incident's node", "INCIDENT"),
        ("reboot", "reboot the incident's node, then health-check it again", "INCIDENT"),
        ("reject", "reject: close the incident, replace nothing", "INCIDENT"),
        ("reset", "reset a storm hold: new alarms of its cluster act again", "HOLD"),
        (
            "proceed",
            "let a job-level incident the blast-radius guard held health-check its nodes",
            "INCIDENT",
        ),
    ):
        command = commands.add_parser(
            decision,
            parents=[common],
            help=f"{summary} (starts the approval state machine)",
            description=f"{summary.capitalize()}. Starts an execution of the approval state "
            'machine with {"incident_id", "decision", "comment"}, exactly what the console\'s '
            '"Start execution" does, named cli-<user>-<time>-<random>, waits for it and prints '
            "whether the decision was accepted. Needs states:StartExecution and "
            "states:DescribeExecution on the approval state machine.",
        )
        command.add_argument(
            "incident",
            metavar=subject,
            help="incident id" if subject == "INCIDENT" else "storm hold id (hold-...)",
        )
        command.add_argument(
            "-m",
            "--comment",
            required=True,
            type=_comment,
            help="why: kept in the audit log with the decision",
        )
        command.add_argument(
            "--timeout",
            type=_seconds,
            default=DEFAULT_APPROVAL_TIMEOUT,
            metavar="SECONDS",
            help=f"how long to wait for the execution (default {DEFAULT_APPROVAL_TIMEOUT:g})",
        )
        _json_option(command)
        command.set_defaults(run=cmd_decide, decision=decision)

    audit = commands.add_parser(
        "audit", help="the audit log: audit verify", description="The audit log."
    )
    audit_commands = audit.add_subparsers(
        title="commands", dest="audit_command", required=True, metavar="COMMAND"
    )
    verify = audit_commands.add_parser(
        "verify",
        parents=[common],
        help="verify hash chains; exit 1 if any is broken",
        description="Walk each chain (seq 1, 2, ..., every prev_hash, every hash) and name the "
        "first broken link. --all scans the whole audit table (dynamodb:Scan), so it also "
        "checks the event#... and decision#... subjects of refused input.",
    )
    verify.add_argument("incidents", nargs="*", metavar="INCIDENT", help="incident ids")
    verify.add_argument("--all", action="store_true", help="every chain in the audit log")
    _json_option(verify)
    verify.set_defaults(run=cmd_audit_verify, usage_error=_verify_usage, parser=verify)

    reconcile = commands.add_parser(
        "reconcile",
        parents=[common],
        help="settle stuck incidents now (what the scheduled reconcile function does)",
        description="Invoke the deployed reconcile function (lambda:InvokeFunction on it) and "
        "wait for its run: nodes kept after a failed close released once HyperPod reports "
        "them Running or gone, closes that never finished, incidents whose execution ended, "
        "undelivered approval cards sent again, orphaned guard slots. Exit 1 if something "
        "needs a person.",
    )
    _json_option(reconcile)
    reconcile.set_defaults(run=cmd_reconcile)

    report = commands.add_parser(
        "report",
        parents=[common],
        help="the fleet figures of the audit log: incidents, times, precision, repeat offenders",
        description="The fleet figures of the incidents opened in the period, computed from "
        "the audit log and the incident records (dynamodb:Scan of the audit table, the "
        "incidents table's by_state index), or from a file a fleet what-if wrote (--from). "
        "Each figure's definition: docs/figures.md.",
    )
    window = report.add_mutually_exclusive_group()
    window.add_argument(
        "--since",
        type=period,
        metavar="PERIOD",
        default=None,
        help=f"the incidents opened in the last PERIOD: 30d, 12h, 2w, 90m (default {DEFAULT_SINCE})",
    )
    window.add_argument("--all", action="store_true", help="every incident, however old")
    report.add_argument(
        "--from",
        dest="log",
        type=Path,
        metavar="FILE",
        default=None,
        help="read the audit log from FILE (JSON Lines, as `sdc fleet` writes it) instead of "
        "the deployment's tables; the period ends at its last entry",
    )
    _json_option(report)
    report.set_defaults(run=cmd_report)

    replay = commands.add_parser(
        "replay-spool",
        parents=[common],
        help="re-send the reports a training rank spooled (trainer_emitter.spool)",
        description="Re-send the metrics and report events the emitter could not deliver and "
        "spooled. Delivered records leave the files, failed ones stay, unreadable lines move "
        "to <file>.rejected. Exit 1 unless everything arrived.",
    )
    replay.add_argument(
        "paths",
        nargs="*",
        type=Path,
        metavar="PATH",
        help="spool files or folders of *.jsonl (default: $SDC_SPOOL_DIR, else "
        f"{spool.default_spool_dir()})",
    )
    replay.add_argument(
        "--event-bus",
        metavar="NAME",
        default=os.environ.get("SDC_EVENT_BUS", "default"),
        help="EventBridge bus of the report events (default: $SDC_EVENT_BUS or default)",
    )
    _json_option(replay)
    replay.set_defaults(run=cmd_replay_spool)
    return parser


def _verify_usage(args: argparse.Namespace) -> str | None:
    if args.all and args.incidents:
        return "give incident ids or --all, not both"
    if not args.all and not args.incidents:
        return "give incident ids, or --all for every chain"
    return None


def main(argv: Sequence[str] | None = None, *, session: boto3.session.Session | None = None) -> int:
    """The `sdc` console script. `session` replaces the one built from --profile and --region
    (tests, and the local run's in-process moto account)."""
    args = build_parser().parse_args(argv)
    usage_error = getattr(args, "usage_error", None)
    problem = usage_error(args) if usage_error else None
    if problem:
        args.parser.error(problem)  # exit 2 with the command's usage
    try:
        return int(args.run(Operator(args, session or default_session(args)), args))
    except KeyboardInterrupt:
        return 130
    except Exception as err:
        message = error_message(err)
        if message is None:
            raise
        print(f"sdc: {message}", file=sys.stderr)
        return EXIT_ERROR
