"""The shell blocks, run against the drill's served account, as an operator would run them.

One local account for the module (`make drill ARGS=--serve` serves the same): the synthesized
stack on moto, the handlers in-process, HyperPod's fake, served on a loopback port; every `sdc`
line runs the real CLI in its own process against that endpoint with the outputs file `--serve`
writes. `aws` lines go through botocore's model of the named operation (each flag must be a
member of its input), then to the same endpoint. A block that decides gets an incident of its
own that awaits approval; `<incident>`, `<id>`, `<hold id>`, `<ApprovalStateMachineArn>` and
the ids the documents show stand for the account's own.

Transcripts (`$ sdc ...` followed by its output) run each command and compare the output's
shape with the document's: the exit status the output implies (a `sdc:` line 2, a refusal or a
broken chain 1, else 0) and the section headings and labels, in order.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from botocore import xform_name
from botocore.validate import validate_parameters

from tests.conftest import REPO, load_fixture
from tests.docs.blocks import Block, blocks_of
from tests.docs.test_data_blocks import ids, shell_lines

pytestmark = [pytest.mark.slow, pytest.mark.synth]

REGION = "us-west-2"
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}
INCIDENT_ID = re.compile(r"sdc-[\w-]+?-i-[0-9a-f]{8,17}-\d{8}T\d{6}")
HOLD_ID = re.compile(r"hold-[\w-]+?-storm-\d{8}T\d{6}")
PLACEHOLDERS = ("<incident>", "<id>")


@dataclass
class Served:
    """The local account served on loopback, with what the blocks stand for."""

    run: Any
    url: str
    outputs: Path
    spool: Path
    instances: list[str]
    incident_id: str = ""
    hold_id: str = ""
    decided: list[str] = field(default_factory=list)

    def env(self, *, credentials: bool = True) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("AWS_", "SDC_")) or k in ("AWS_EC2_METADATA_DISABLED",)
        }
        env.update(
            AWS_DEFAULT_REGION=REGION,
            AWS_CONFIG_FILE="/nonexistent",
            AWS_SHARED_CREDENTIALS_FILE="/nonexistent",
            AWS_EC2_METADATA_DISABLED="true",
            PYTHONPATH=str(REPO),
        )
        if credentials:
            # the local account's operator (an IAM user moto knows): `sdc approve` signs its
            # identity proof with this key, and decide redeems it against the account
            env.update(
                AWS_ACCESS_KEY_ID=os.environ["AWS_ACCESS_KEY_ID"],
                AWS_SECRET_ACCESS_KEY=os.environ["AWS_SECRET_ACCESS_KEY"],
            )
        return env

    def waiting_incident(self) -> str:
        """A new incident awaiting approval, on a node nobody has decided about yet (the guard
        lets one incident of the 4-node cluster be open at a time: the previous one is closed)."""
        from sdc_remediation.lambdas.models.incident import IncidentState

        ended = [s.value for s in IncidentState if s.terminal]
        for previous in self.decided:
            self.run.wait_for(previous, *ended, timeout=120)
        instance = self.instances.pop(0)
        event = load_fixture("events", "contributor_alarm")
        event["detail"]["alarmContributor"]["attributes"] = {
            "ClusterName": "ml-cluster-1",
            "InstanceId": instance,
        }
        (delivery,) = self.run.put_event(event)
        self.incident_id = delivery.response["incident_id"]
        self.run.wait_for(self.incident_id, "awaiting_approval", timeout=120)
        self.decided.append(self.incident_id)
        return self.incident_id

    def awaiting_incident(self) -> str:
        """The current incident if it still awaits approval (a page's blocks only read it), else
        a new one: the cluster has four nodes, one for each incident the blocks need."""
        from sdc_remediation.lambdas.models.incident import IncidentState

        current = self.run.incident(self.incident_id) if self.incident_id else None
        if current is not None and current.state == IncidentState.AWAITING_APPROVAL:
            return self.incident_id
        return self.waiting_incident()

    def storm_hold(self) -> str:
        from sdc_remediation.lambdas.logic.core.audit import Auditor
        from sdc_remediation.lambdas.logic.ports import SystemClock
        from sdc_remediation.lambdas.models.guard import ClusterHold

        hold = ClusterHold(
            # another cluster's: a hold of ml-cluster-1 would hold the incidents the blocks decide
            hold_id=f"hold-ml-cluster-2-storm-20261130T08{len(self.decided):02d}04",
            cluster_name="ml-cluster-2",
            reason="4 distinct instances flagged within 900 s (threshold 4)",
            created_at="2026-11-30T08:15:04+00:00",
            instances=["i-0aa00000000000001", "i-0bb00000000000002"],
            threshold=4,
            window_seconds=900,
        )
        self.run.deps.guard.create_hold(hold)
        Auditor(self.run.deps.audit, SystemClock()).record(
            hold.hold_id, "storm_hold_started", actor="open_incident", details={}
        )
        self.hold_id = hold.hold_id
        return hold.hold_id

    def substitute(self, word: str) -> str:
        for placeholder in PLACEHOLDERS:
            word = word.replace(placeholder, self.incident_id)
        word = word.replace("<hold id>", self.hold_id)
        word = word.replace("<ApprovalStateMachineArn>", self._output("ApprovalStateMachineArn"))
        word = word.replace("/fsx/sdc-spool", str(self.spool))
        word = INCIDENT_ID.sub(self.incident_id, word)
        return HOLD_ID.sub(self.hold_id, word)

    def _output(self, name: str) -> str:
        return str(json.loads(self.outputs.read_text())[name])

    def sdc(self, argv: list[str], *, credentials: bool = True) -> subprocess.CompletedProcess[str]:
        assert argv[0] == "sdc", argv
        where = ["--endpoint-url", self.url]
        if "--stack" not in argv:
            where += ["--outputs", str(self.outputs)]
        return subprocess.run(
            [sys.executable, "-m", "sdc_remediation.infra.cli", *where, *argv[1:]],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=180,
            env=self.env(credentials=credentials),
        )


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[Served]:
    from sdc_remediation.infra.local.ranks import free_port
    from sdc_remediation.infra.local.run import LocalRun

    folder = tmp_path_factory.mktemp("served")
    # The blocks decide about every node of the cluster within minutes: four nodes flagged in a
    # window would be a storm, so the storm rule is set past the blocks' count.
    with LocalRun.open(context={"sdc:stormThreshold": 10}) as run:
        url = run.serve(free_port())
        outputs = Path(run.write_outputs(str(folder / "outputs.json")))
        # the nodes of sdc_remediation.infra.local.run.default_cluster, in turn
        instances = [f"i-0{c}{c}0000000000000{n}" for n, c in enumerate("abcd", start=1)]
        yield Served(run, url, outputs, folder / "sdc-spool", instances)


# -- sdc -------------------------------------------------------------------------------------

SDC = blocks_of("sdc")


@pytest.mark.parametrize("block", SDC, ids=ids(SDC))
def test_every_sdc_line_runs_against_the_served_account(block, served):
    prepare(block, served)

    for argv in shell_lines(served.substitute(block.text)):
        if argv[:3] == ["pip", "install", "-e"]:
            # Installing the project is what `make test` did; the console script must exist
            from importlib.metadata import entry_points

            assert "sdc" in {e.name for e in entry_points(group="console_scripts")}
            continue
        done = served.sdc(argv)

        assert done.returncode == 0, f"{block.id}: {argv}\n{done.stdout}\n{done.stderr}"


# -- aws -------------------------------------------------------------------------------------

AWS = blocks_of("aws")
AWS_MODEL = blocks_of("aws-model")


def aws_request(argv: list[str], session: Any) -> tuple[Any, str, dict[str, Any]]:
    """`aws SERVICE OPERATION --flag value ...` as (client, method, parameters), every flag a
    member of the operation's input in botocore's model, every value of the member's type."""
    assert argv[0] == "aws", argv
    client = session.client(argv[1], region_name=REGION)
    model = client.meta.service_model
    (operation,) = [n for n in model.operation_names if xform_name(n, "-") == argv[2]]
    shape = model.operation_model(operation).input_shape
    members = {xform_name(name, "-"): name for name in shape.members}
    params: dict[str, Any] = {}
    words = argv[3:]
    while words:
        flag = words.pop(0)
        assert flag.startswith("--"), f"{argv}: {flag} is no flag"
        name = flag[2:]
        negated = name.startswith("no-") and name[3:] in members
        member = members[name[3:] if negated else name]
        kind = shape.members[member].type_name
        if kind == "boolean":
            params[member] = not negated
            continue
        value = words.pop(0)
        if kind in ("structure", "list", "map"):
            params[member] = json.loads(value)
        elif kind in ("integer", "long"):
            params[member] = int(value)
        else:
            params[member] = value
    validate_parameters(params, shape)
    return client, xform_name(operation), params


@pytest.mark.parametrize("block", AWS, ids=ids(AWS))
def test_every_aws_line_runs_against_the_served_account(block, served):
    import boto3

    prepare(block, served)
    session = boto3.session.Session(region_name=REGION, **_lower(CREDENTIALS))

    for argv in shell_lines(served.substitute(block.text)):
        _, method, params = aws_request(argv, session)
        endpoint = session.client(argv[1], region_name=REGION, endpoint_url=served.url)

        answer = getattr(endpoint, method)(**params)

        assert answer["ResponseMetadata"]["HTTPStatusCode"] == 200, (block.id, argv)
    if "waiting" in block.argument:
        # the documented decision took effect
        incident = served.run.wait_for(served.incident_id, "replacing", "replaced", timeout=120)
        assert incident.decision is not None


@pytest.mark.parametrize("block", AWS_MODEL, ids=ids(AWS_MODEL))
def test_every_aws_line_that_cannot_run_here_fits_the_api_model(block):
    import boto3

    session = boto3.session.Session(region_name=REGION, **_lower(CREDENTIALS))
    for argv in shell_lines(block.text):
        _, method, params = aws_request(argv, session)

        assert method and params


def _lower(credentials: dict[str, str]) -> dict[str, str]:
    return {
        "aws_access_key_id": credentials["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": credentials["AWS_SECRET_ACCESS_KEY"],
        "aws_session_token": credentials["AWS_SESSION_TOKEN"],
    }


def test_a_flag_the_model_does_not_have_is_refused():
    import boto3

    session = boto3.session.Session(region_name=REGION, **_lower(CREDENTIALS))
    with pytest.raises(KeyError):
        aws_request(["aws", "ssm", "put-parameter", "--nmae", "/x", "--value", "y"], session)


# -- transcripts -----------------------------------------------------------------------------

TRANSCRIPTS = blocks_of("transcript")
HEADING = re.compile(r"^((?:[A-Z][A-Z-]+:?(?: |$))+)")
LABEL = re.compile(r"^ {2,}([a-z][a-z -]*[a-z])(?: {2,}| *:)\S")
PHRASE = re.compile(r"^([a-z][a-z ]*[a-z])\b")


def commands(text: str) -> list[tuple[str, list[str]]]:
    """`(command, output lines)` for each `$ ` line of a transcript."""
    found: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            found.append((line[2:], []))
        else:
            assert found, f"output before the first command: {line!r}"
            found[-1][1].append(line)
    return found


def shape(lines: list[str]) -> list[str]:
    """The headings, labels and leading phrases of an output, in order; the values between them
    (ids, times, counts) are the account's own."""
    seen = []
    for line in lines:
        heading = HEADING.match(line)
        label = LABEL.match(line)
        phrase = PHRASE.match(line)
        if heading:
            # the words before a colon: what follows it is the incident's own verdict
            seen.append(heading[1].split(":")[0].strip())
        elif label:
            seen.append("  " + label[1])
        elif phrase:
            seen.append(phrase[1])
    return seen


def expected_status(lines: list[str]) -> int:
    if lines and lines[0].startswith("sdc: "):
        return 2
    if any(line.startswith("BROKEN") or " refused for " in line for line in lines):
        return 1
    return 0


def first_missing(wanted: list[str], seen: list[str]) -> str | None:
    """The first of `wanted` that `seen` lacks in that order, or None."""
    rest = iter(seen)
    for w in wanted:
        if not any(w == s for s in rest):
            return w
    return None


def prepare(block: Block, served: Served) -> None:
    """What the block's marker says the account holds before it runs: `waiting` a new incident
    awaiting approval, `hold` a new active storm hold, `spool` two spooled reports, `tampered`
    the current incident's (a new waiting one if there is none yet) third audit entry rewritten."""
    wanted = set(block.argument.split())
    assert wanted <= {"waiting", "hold", "spool", "tampered"}, block.id
    if "waiting" in wanted:
        served.waiting_incident()
    if "hold" in wanted:
        served.storm_hold()
    if "spool" in wanted:
        _spool_two_reports(served.spool)
    if "tampered" in wanted:
        if not served.incident_id:  # the block runs alone, or before any block that opened one
            served.waiting_incident()
        _tamper(served, seq=3)


def _spool_two_reports(folder: Path) -> None:
    from datetime import UTC, datetime

    from trainer_emitter.mapping import build_report
    from trainer_emitter.rankmap import RankMap
    from trainer_emitter.spool import append, spool_file

    alarm = {**load_fixture("alarms", "weights_suspect")}
    rank_map = RankMap(load_fixture("alarms", "rank_map"))
    for n in range(2):
        report = build_report(
            alarm,
            rank_map,
            # a cluster the deployment does not act on: the replayed reports are audited as
            # ignored and open nothing that would hold the blocks after this one
            cluster_name="ml-cluster-2",
            job_name="llama-pretrain",
            namespace="SDC/Training",
            report_id=f"0c4f2e9e-8d53-4a8e-9c6f-59f8d5a1e0b{n}",
            now=datetime.now(UTC),
            reporting_rank=0,
        )
        append(spool_file(folder, 0), report, "SDC/Training", ["event"], "unreachable")


def _tamper(served: Served, seq: int) -> None:
    """Rewrite one audit entry's content in place, as someone with PutItem could."""
    outputs = json.loads(served.outputs.read_text())
    table = served.run.session.resource("dynamodb").Table(outputs["AuditTableName"])
    item = table.get_item(Key={"incident_id": served.incident_id, "seq": seq})["Item"]
    item["actor"] = "someone-else"
    table.put_item(Item=item)


@pytest.mark.parametrize("block", TRANSCRIPTS, ids=ids(TRANSCRIPTS))
def test_every_transcript_runs_and_its_output_has_the_documented_shape(block, served):
    prepare(block, served)

    for command, documented in commands(block.text):
        argv = shlex.split(served.substitute(command))
        no_credentials = any("no AWS credentials" in line for line in documented)

        done = served.sdc(argv, credentials=not no_credentials)

        output = (done.stdout + done.stderr).splitlines()
        assert done.returncode == expected_status(documented), (block.id, command, output)
        if output and output[0].startswith("sdc: "):
            # one error line: the same words up to the account's own values
            assert output[0].split(": ")[:2] == [
                served.substitute(w) for w in documented[0].split(": ")[:2]
            ], (block.id, output[0])
        missing = first_missing(shape(documented), shape(output))
        assert missing is None, f"{block.id}: `{command}` printed no {missing!r}:\n" + "\n".join(
            output
        )


def test_the_shape_of_an_output_is_its_headings_labels_and_phrases():
    lines = [
        "SDC remediation, stack X, at 2026",
        "  pause switch  /x = false",
        "OPEN INCIDENTS (2)",
        "  opened 0, health_check 1",
        "RECOMMENDATION: REPLACE AFTER REVIEW",
        "approve accepted for sdc-x: next",
    ]

    assert shape(lines) == [
        "SDC",
        "  pause switch",
        "OPEN INCIDENTS",
        "RECOMMENDATION",
        "approve accepted for sdc",
    ]


# -- the approver's policy -------------------------------------------------------------------

APPROVER_POLICY = blocks_of("approver-policy")


@pytest.mark.parametrize("block", APPROVER_POLICY, ids=ids(APPROVER_POLICY))
def test_the_approvers_policy_allows_every_call_sdc_approve_makes(block, served):
    import threading

    from sdc_remediation.infra.cli.main import main

    served.awaiting_incident()
    called: dict[str, set[str]] = {}
    cli = threading.get_ident()

    def record(model: Any, params: dict[str, Any], context: Any = None, **_: Any) -> None:
        # the CLI's own calls; the functions it sets off run on the state machine's threads;
        # presigning the identity proof sends nothing (and sts:GetCallerIdentity needs no grant)
        if threading.get_ident() == cli and not (context or {}).get("is_presign_request"):
            action = f"{model.service_model.signing_name}:{model.name}"
            called.setdefault(action, set()).add(_resource(params))

    session = served.run.operator_session()
    session.events.register("before-parameter-build", record)
    try:
        status = main(
            ["--outputs", str(served.outputs), "approve", served.incident_id, "-m", "policy"],
            session=session,
        )
    finally:
        session.events.unregister("before-parameter-build", record)

    table = json.loads(served.outputs.read_text())["IncidentsTableName"]
    documented = json.loads(block.text.replace("<IncidentsTableName>", table))
    allowed = {
        s["Action"]: s["Resource"] for s in documented["Statement"] if s["Effect"] == "Allow"
    }
    assert status == 0
    assert called, "sdc approve called nothing"
    assert set(called) <= set(allowed), f"{block.id} lacks {sorted(set(called) - set(allowed))}"
    for action, resources in called.items():
        for resource in resources:
            assert fnmatch.fnmatchcase(resource, allowed[action]), (action, resource)


def _resource(params: dict[str, Any]) -> str:
    """The ARN a call acts on, as IAM sees it, for the calls `sdc approve` makes."""
    if "TableName" in params:
        return f"arn:aws:dynamodb:{REGION}:123456789012:table/{params['TableName']}"
    return str(params.get("stateMachineArn") or params.get("executionArn"))


def test_a_section_the_output_lacks_or_moved_is_named():
    printed = ["NODE", "  status", "EVIDENCE", "RECOMMENDATION: HEALTH CHECK ONLY"]

    assert first_missing(shape(["NODE", "EVIDENCE"]), shape(printed)) is None
    assert first_missing(shape(["NODES"]), shape(printed)) == "NODES"
    assert first_missing(shape(["EVIDENCE", "NODE"]), shape(printed)) == "NODE"
