"""`sdc report --from FILE`: the figures of an audit log written to a file, in text and JSON; a
line that is no audit entry is refused naming it. (Against a deployment's tables:
tests/e2e/test_report_on_moto.py.)"""

from __future__ import annotations

import json

import pytest

from sdc_remediation.infra.cli.main import main as sdc
from sdc_remediation.infra.cli.report import write_log
from tests.unit.test_figures import T0, chain, opened, replaced_chain


def test_the_text_report_gives_each_figure_on_its_line(tmp_path, capsys):
    log = write_log(
        tmp_path / "audit.jsonl",
        {"a": replaced_chain("a", isolate=2, request=10, decide=70, close=600)},
        [],
    )

    status = sdc(["report", "--from", str(log), "--all"])

    out = capsys.readouterr().out
    assert status == 0
    assert "  incidents                 1\n" in out
    assert "  time_to_decision          median 70, p90 70 (n=1)\n" in out
    assert "  remediation_precision     0.0% (0 of 1)\n" in out


def test_the_period_of_a_file_ends_at_its_last_entry(tmp_path, capsys):
    old = chain("old", [opened("i-1")])
    new = chain("new", [opened("i-2")], start=T0.replace(month=12))
    log = write_log(tmp_path / "audit.jsonl", {"old": old, "new": new}, [])

    sdc(["report", "--from", str(log), "--since", "7d", "--output", "json"])

    assert json.loads(capsys.readouterr().out)["figures"]["incidents"] == 1


def test_a_line_that_is_no_audit_entry_is_refused_naming_it(tmp_path, capsys):
    log = tmp_path / "audit.jsonl"
    log.write_text('{"audit": {"incident_id": "a"}}\n')

    status = sdc(["report", "--from", str(log)])

    assert status == 2
    assert f"{log}:1: not an audit entry or incident record" in capsys.readouterr().err


def test_a_period_that_does_not_read_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as done:
        sdc(["report", "--since", "a month"])

    assert done.value.code == 2
    assert "is not a period" in capsys.readouterr().err
