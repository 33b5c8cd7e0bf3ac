"""The fleet what-if (`sdc_remediation.infra.local.fleet`) on a small slice: a short history on a small cluster
through the pipeline's own logic, its audit log read back by `sdc report --from`."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sdc_remediation.infra.cli.main import main as sdc
from sdc_remediation.infra.cli.report import write_log
from sdc_remediation.infra.local.fleet.__main__ import (
    FleetSettingsError,
    main,
    read_settings,
    summary_rows,
)
from sdc_remediation.infra.local.fleet.causes import (
    LLAMA3_405B,
    Cause,
    HistoryError,
    Signal,
    read_history,
)
from sdc_remediation.infra.local.fleet.whatif import (
    Approvers,
    JobModel,
    Mode,
    ModeResult,
    _Pipeline,
    deployment,
    function_settings,
    held_genuine,
    nodes_replaced,
    simulate,
)
from sdc_remediation.lambdas.logic.core.figures import Figure
from sdc_remediation.lambdas.models.hardware_alert import HardwareRule
from tests.conftest import REPO

SLICE = tuple(dataclasses.replace(c, count=max(1, c.count // 40)) for c in LLAMA3_405B)
"""One fault of each cause, a few of the common ones: 23 faults."""


@pytest.fixture(scope="module")
def replayed() -> dict[Mode, ModeResult]:
    return simulate(SLICE, days=3, nodes=64, job=JobModel(), approvers=Approvers(), seed=3)


def test_the_default_history_is_the_papers_419_unexpected_interruptions():
    assert sum(c.count for c in LLAMA3_405B) == 419
    assert {c.name: c.count for c in LLAMA3_405B}["faulty GPU"] == 148
    assert {c.name: c.count for c in LLAMA3_405B}["silent data corruption"] == 6


def test_every_fault_is_accounted_for_in_each_of_the_three_ways(replayed):
    faults = sum(c.count for c in SLICE)

    assert [len(r.faults) for r in replayed.values()] == [faults] * 3
    assert all(0 < r.ettr < 1 for r in replayed.values())


def test_the_pipeline_replaced_the_nodes_its_hardware_alerts_and_sdc_report_named(replayed):
    result = replayed[Mode.AUTO_APPROVE]
    acted = [c for c in SLICE if c.signal in (Signal.HARDWARE_ALERT, Signal.SDC_CHECK)]

    assert result.report is not None
    assert nodes_replaced(result) == sum(c.count for c in acted)
    assert result.report.values[Figure.PRECISION].value == pytest.approx(
        sum(c.count for c in acted if c.node_fault) / sum(c.count for c in acted)
    )


def test_the_replays_audit_log_reads_back_through_sdc_report(replayed, tmp_path, capsys):
    result = replayed[Mode.PIPELINE]
    log = write_log(tmp_path / "pipeline.jsonl", result.chains, result.incidents)

    status = sdc(["report", "--from", str(log), "--all", "--output", "json"])

    figures = json.loads(capsys.readouterr().out)["figures"]
    assert status == 0
    assert result.report is not None
    assert figures["incidents"] == result.report.values[Figure.INCIDENTS] > 0
    assert figures["outcomes"] == result.report.values[Figure.OUTCOMES]


def test_with_no_spare_node_the_human_approval_costs_training_time():
    job = JobModel(spare_nodes=0)
    slow = Approvers(day_median_seconds=4 * 3600, night_median_seconds=8 * 3600)
    hardware = tuple(c for c in SLICE if c.signal is Signal.HARDWARE_ALERT)

    results = simulate(hardware, days=3, nodes=64, job=job, approvers=slow, seed=5)

    assert results[Mode.AUTO_APPROVE].ettr > results[Mode.PIPELINE].ettr


def test_the_replay_runs_the_stacks_state_machine_its_approval_timeout_included():
    # Given a deployment whose cards expire after ten minutes, and approvers who take hours
    stack = deployment({"sdc:approvalTimeoutSeconds": 600})
    slow = Approvers(day_median_seconds=4 * 3600, night_median_seconds=8 * 3600, spread=0.1)
    hardware = tuple(c for c in SLICE if c.signal is Signal.HARDWARE_ALERT)

    # When the history is replayed
    results = simulate(hardware, days=3, nodes=64, job=JobModel(), approvers=slow, stack=stack)

    # Then every card expired before its answer, as the definition's RequestApproval times out,
    # and nothing was replaced; approving at once, nothing expired
    waited, at_once = results[Mode.PIPELINE], results[Mode.AUTO_APPROVE]
    assert waited.report is not None and at_once.report is not None
    assert waited.report.values[Figure.OUTCOMES] == {"expired": len(waited.incidents)}
    assert nodes_replaced(waited) == 0
    assert "expired" not in at_once.report.values[Figure.OUTCOMES]
    assert waited.executions == {"SUCCEEDED": len(waited.incidents)}


def test_a_faulty_node_left_unremedied_costs_the_job_a_second_interruption_and_a_triage():
    # Given hardware faults whose cards expire before the slow approvers answer
    stack = deployment({"sdc:approvalTimeoutSeconds": 600})
    slow = Approvers(day_median_seconds=4 * 3600, night_median_seconds=8 * 3600, spread=0.1)
    hardware = tuple(c for c in SLICE if c.signal is Signal.HARDWARE_ALERT and c.node_fault)
    job = JobModel()

    # When the history is replayed
    results = simulate(hardware, days=3, nodes=64, job=job, approvers=slow, stack=stack)

    # Then each expired incident's fault costs a restart and a person's triage beyond what the
    # same fault costs where the node was replaced at once
    waited, at_once = results[Mode.PIPELINE], results[Mode.AUTO_APPROVE]
    extra = [w.lost - a.lost for w, a in zip(waited.faults, at_once.faults, strict=True)]
    assert len(extra) == sum(c.count for c in hardware) > 0
    assert min(extra) >= job.restart_seconds + job.manual_triage_seconds
    assert waited.ettr < at_once.ettr


def test_every_step_of_an_incident_is_a_function_the_definition_invoked(replayed):
    result = replayed[Mode.AUTO_APPROVE]
    opened = len(result.incidents)

    assert result.executions == {"SUCCEEDED": opened}
    assert result.invocations["isolate_node"] == opened
    assert result.invocations["close_incident"] == opened
    assert result.invocations["decide"] == result.invocations["request_approval"]
    assert result.invocations["check_health"] > result.invocations["start_health_check"]


def test_a_team_history_reads_from_csv(tmp_path):
    path = tmp_path / "ours.csv"
    path.write_text(
        "cause,count,signal,delay_seconds,hyperpod_sees,node_fault,rule\n"
        "bad HBM,5,hardware alert,60,true,true,uncorrectable_ecc\n"
        "flaky job,3,job restart,0,false,false,\n"
    )

    causes = read_history(path)

    assert [(c.name, c.count, c.signal, c.rule) for c in causes] == [
        ("bad HBM", 5, Signal.HARDWARE_ALERT, HardwareRule.UNCORRECTABLE_ECC),
        ("flaky job", 3, Signal.JOB_RESTART, None),
    ]


def test_a_history_row_with_an_unknown_signal_is_refused_naming_its_line(tmp_path):
    path = tmp_path / "ours.csv"
    path.write_text(
        "cause,count,signal,delay_seconds,hyperpod_sees,node_fault\nx,1,smoke signal,0,false,false\n"
    )

    with pytest.raises(HistoryError, match=r"ours.csv:2: signal 'smoke signal' is none of"):
        read_history(path)


def test_a_history_row_short_of_columns_is_refused_naming_its_line(tmp_path):
    # Given a row that stops after its count
    path = tmp_path / "ours.csv"
    path.write_text("cause,count,signal,delay_seconds,hyperpod_sees,node_fault\nx,1\n")

    # When it is read, then the error names the line and the columns it lacks
    with pytest.raises(HistoryError, match=r"ours.csv:2: no value for signal, delay_seconds"):
        read_history(path)


def test_settings_reach_the_functions_and_the_state_machine_as_a_deployment_gives_them(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(
        json.dumps(
            {
                "sdc:guardMaxOpenNodes": 8,
                "sdc:repeatOffenderIncidents": 2,
                "sdc:approvalTimeoutSeconds": 3600,
                "job": {"spare_nodes": 4},
                "approvers": {"night_median_seconds": 600},
            }
        )
    )

    stack, job, approvers = read_settings(path)

    functions = function_settings(stack)
    assert (functions.guard_max_open_nodes, functions.repeat_offender_incidents) == (8, 2)
    replay = _Pipeline(Mode.PIPELINE, [], job, approvers, stack, nodes=2, seed=1)
    assert replay.workflow.remediation["States"]["RequestApproval"]["TimeoutSeconds"] == 3600
    assert (job.spare_nodes, approvers.night_median_seconds) == (4, 600)


@pytest.mark.parametrize("model", [{"job": {"spare_nodes": "many"}}, {"approvers": {"spread": -1}}])
def test_a_job_or_approvers_field_that_is_not_a_number_of_zero_or_more_is_refused(tmp_path, model):
    # Given a settings file whose job or approvers give a field a string or a negative number
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(model))

    # When it is read, then the error names the field
    with pytest.raises(FleetSettingsError, match=r"(spare_nodes|spread): a number, 0 or more"):
        read_settings(path)


def test_a_checkpoint_interval_of_zero_is_refused(tmp_path):
    # Given a job that never checkpoints (the recomputation is the time since the last one)
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"job": {"checkpoint_interval_seconds": 0}}))

    # When it is read, then the error names the field rather than a division failing later
    with pytest.raises(
        FleetSettingsError, match=r"job.checkpoint_interval_seconds: a number above 0"
    ):
        read_settings(path)


def test_a_settings_key_the_stack_refuses_is_refused(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"sdc:guardMaxOpenNodes": 0}))

    with pytest.raises(FleetSettingsError, match="sdc:guardMaxOpenNodes"):
        read_settings(path)


def test_the_command_prints_the_table_and_writes_the_audit_logs(tmp_path, capsys):
    history = tmp_path / "ours.csv"
    history.write_text(
        "cause,count,signal,delay_seconds,hyperpod_sees,node_fault,rule\n"
        "bad GPU,3,hardware alert,60,true,true,critical_xid\n"
    )

    status = main(
        ["--history", str(history), "--days", "2", "--nodes", "16", "--out", str(tmp_path)]
    )

    out = capsys.readouterr().out
    assert status == 0
    assert "| ETTR |" in out and Mode.HYPERPOD_ONLY.value in out
    assert Path(tmp_path / "pipeline.jsonl").exists()
    assert json.loads((tmp_path / "fleet.json").read_text())["faults"] == 3


@pytest.mark.parametrize("delay", ["nan", "inf"])
def test_a_history_row_whose_delay_is_not_a_finite_number_is_refused_naming_its_line(
    tmp_path, delay
):
    # Given a row whose delay Python's float() reads but no clock can wait
    path = tmp_path / "ours.csv"
    path.write_text(
        "cause,count,signal,delay_seconds,hyperpod_sees,node_fault\n"
        f"x,1,sdc check,{delay},false,false\n"
    )

    # When it is read, then the error names the line instead of the replay failing on it
    with pytest.raises(HistoryError, match=r"ours.csv:2: .*delay_seconds"):
        read_history(path)


@pytest.mark.parametrize(
    ("model", "field"),
    [
        ('{"job": {"spare_nodes": 2.5}}', "job.spare_nodes"),
        ('{"approvers": {"day_starts_hour": 7.5}}', "approvers.day_starts_hour"),
        ('{"job": {"restart_seconds": NaN}}', "job.restart_seconds"),
        ('{"approvers": {"day_median_seconds": Infinity}}', "approvers.day_median_seconds"),
    ],
)
def test_a_job_or_approvers_field_that_is_not_a_number_of_its_kind_is_refused_naming_it(
    tmp_path, model, field
):
    # Given a count given a fraction, or a duration given JSON's NaN or Infinity
    path = tmp_path / "settings.json"
    path.write_text(model)

    # When it is read, then the error names the field (not a traceback, nor NaN figures)
    with pytest.raises(FleetSettingsError, match=re.escape(field)):
        read_settings(path)


@pytest.mark.parametrize(
    "hours",
    [{"day_starts_hour": 8, "day_ends_hour": 30}, {"day_starts_hour": 20, "day_ends_hour": 8}],
)
def test_approver_day_hours_outside_one_day_are_refused(tmp_path, hours):
    # Given approvers whose day never happens (every card would get the night's latency)
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"approvers": hours}))

    with pytest.raises(FleetSettingsError, match=r"approvers\.day_\w+_hour"):
        read_settings(path)


@pytest.mark.parametrize(
    "key",
    [
        {"sdc:approvalsRequired": 2},
        {"sdc:approvers": ["arn:aws:iam::123456789012:role/oncall"]},
        {"sdc:requireIdentityProof": True},
        {"sdc:dryRun": True},
    ],
)
def test_a_setting_the_modelled_approvers_or_nodes_cannot_honour_is_refused_naming_it(
    tmp_path, key
):
    # Given a deployment whose approvals need identities or a second person, or that only
    # records its replacements: the modelled approver gives one decision without an identity
    # proof, so every card would expire (or every "replaced" node stay in the job), while the
    # table reads as if the pipeline had acted
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(key))

    # When it is read, then it is refused, naming the key
    with pytest.raises(FleetSettingsError, match=re.escape(next(iter(key)))):
        read_settings(path)


@pytest.mark.parametrize(
    "argv", [["--days", "nan"], ["--days", "inf"], ["--days", "1e7"], ["--nodes", "3"]]
)
def test_a_span_or_cluster_the_replay_cannot_model_is_a_usage_error(tmp_path, capsys, argv):
    # Given a span that is no number of days (or beyond any calendar), or fewer instances than
    # the four-node job the SDC report's rank map lays over them
    # When the command runs, then it stops with a usage error naming the option
    with pytest.raises(SystemExit) as stopped:
        main([*argv, "--out", str(tmp_path)])

    assert stopped.value.code == 2
    assert argv[0] in capsys.readouterr().err


def test_approvers_who_take_longer_than_any_card_waits_leave_every_card_expired():
    # Given approvers whose latency spreads over many orders of magnitude
    wild = Approvers(spread=50)
    hardware = tuple(c for c in SLICE if c.signal is Signal.HARDWARE_ALERT)

    # When the history is replayed, then it ends (an answer ages out, not the calendar)
    results = simulate(hardware, days=3, nodes=64, job=JobModel(), approvers=wild, seed=5)

    waited = results[Mode.PIPELINE]
    assert len(waited.faults) == sum(c.count for c in hardware)
    assert waited.executions["RUNNING"] == 0


def test_an_incident_the_state_machine_closes_as_held_counts_as_held_not_as_detected():
    # Given a storm hold that trips while the incidents opened before it are still in their
    # health checks (the state machine then closes them as held), the guard out of the way
    stack = deployment(
        {
            "sdc:stormThreshold": 5,
            "sdc:stormWindowSeconds": 3600,
            "sdc:guardMaxOpenNodes": 50,
            "sdc:guardMaxOpenPercent": 100,
        }
    )
    burst = (Cause("bad GPU", 30, Signal.HARDWARE_ALERT, 60, False, True, HardwareRule.XID),)

    # When the burst is replayed
    results = simulate(
        burst, days=0.3, nodes=64, job=JobModel(), approvers=Approvers(), stack=stack
    )

    # Then every incident closed as held is a held fault (a person triages its node), whether
    # the intake or the state machine held it
    result = results[Mode.AUTO_APPROVE]
    assert result.report is not None
    closed_held = result.report.values[Figure.OUTCOMES]["held"]
    assert result.executions["SUCCEEDED"] > 0  # some reached the state machine
    assert sum(held_genuine(result).values()) == closed_held
    assert sum(f.detected for f in result.faults) == len(result.faults) - closed_held


def test_the_what_if_runs_without_the_cdk_libraries_or_node():
    # Given a Python where the CDK libraries cannot be imported (a team's laptop with the
    # functions' dependencies, no Node.js for jsii)
    blocked = "import sys\nfor name in ('aws_cdk', 'constructs', 'cdk_nag', 'jsii'):\n"
    blocked += "    sys.modules[name] = None\n"

    # When the what-if's command is imported there
    code = blocked + "import sdc_remediation.infra.local.fleet.__main__\n"
    ran = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=False
    )

    # Then it loads: it builds the definitions as plain data, not through the constructs
    assert ran.returncode == 0, ran.stderr[-2000:]


def test_the_read_back_the_command_prints_gives_the_tables_figures_for_a_history_over_30_days(
    tmp_path, capsys
):
    # Given a history longer than the 30 days `sdc report` reads by default
    history = tmp_path / "ours.csv"
    history.write_text(
        "cause,count,signal,delay_seconds,hyperpod_sees,node_fault,rule\n"
        "bad GPU,6,hardware alert,60,false,true,critical_xid\n"
    )
    main(["--history", str(history), "--days", "60", "--nodes", "16", "--out", str(tmp_path)])
    printed = capsys.readouterr().out
    replaced = json.loads((tmp_path / "fleet.json").read_text())["summary"][7]
    assert replaced[0] == "nodes replaced by the pipeline"

    # When the pipeline's audit log is read back the way the command says
    command = re.search(r"\(sdc (report [^)]*)FILE\)", printed)
    assert command is not None
    sdc([*command.group(1).split(), str(tmp_path / "pipeline.jsonl"), "--output", "json"])

    # Then it gives the table's figures: every incident of the history, not its last 30 days
    figures = json.loads(capsys.readouterr().out)["figures"]
    assert figures["outcomes"]["replaced"] == int(replaced[2]) == 6


def test_the_table_shows_how_the_incidents_closed_so_expired_cards_are_seen():
    # Given cards that expire before the approvers answer
    stack = deployment({"sdc:approvalTimeoutSeconds": 600})
    slow = Approvers(day_median_seconds=4 * 3600, night_median_seconds=8 * 3600, spread=0.1)
    hardware = tuple(c for c in SLICE if c.signal is Signal.HARDWARE_ALERT)
    results = simulate(hardware, days=3, nodes=64, job=JobModel(), approvers=slow, stack=stack)

    # When the table is made
    rows = {row[0]: row[1:] for row in summary_rows(results)}

    # Then a row says how the pipeline's incidents closed: every one expired here (the
    # executions all succeeded, and no other row says why nothing was replaced)
    expired = len(results[Mode.PIPELINE].incidents)
    assert rows["incidents by outcome"][1] == f"expired {expired}"
    assert rows["incidents by outcome"][0] == "-"


def test_a_history_saved_with_a_byte_order_mark_reads(tmp_path):
    # Given a history a spreadsheet saved as "CSV UTF-8" (a byte order mark before the header)
    path = tmp_path / "ours.csv"
    path.write_bytes(
        b"\xef\xbb\xbfcause,count,signal,delay_seconds,hyperpod_sees,node_fault\n"
        b"flaky job,3,job restart,0,false,false\n"
    )

    # When it is read, then its first column is `cause`, not a column it lacks
    assert [(c.name, c.count) for c in read_history(path)] == [("flaky job", 3)]


def test_a_teams_own_clusters_key_is_refused_rather_than_leaving_the_pipeline_blind(tmp_path):
    # Given the sdc:* keys of a team's cdk.json, its own clusters among them: the what-if's
    # signals come from its own cluster, which the intake would then refuse, one by one, and
    # the pipeline's columns would read as HyperPod alone's
    path = tmp_path / "settings.json"
    path.write_text(
        json.dumps(
            {
                "sdc:clusters": {"ml-cluster": "abcdefabcdef"},
                "sdc:nodeIsolation": {"ml-cluster": "ml-eks"},
            }
        )
    )

    # When it is read, then it is refused, naming the key
    with pytest.raises(FleetSettingsError, match="sdc:clusters"):
        read_settings(path)
