"""The command lines' habits: `--output json|text` (`-o`) and never an abbreviation, `--version`
from the project's one version, `make help`, and `sdc-replay-spool --help` saying what each option
does. (What the commands do against a deployment: tests/integration/test_cli.py.)"""

from __future__ import annotations

import re
import subprocess

import pytest

from sdc_remediation.infra.cli.main import build_parser
from sdc_remediation.infra.cli.render import Output, wants_json
from tests.conftest import REPO
from trainer_emitter import __version__, spool


@pytest.mark.parametrize(
    ("argv", "output"),
    [
        (["status"], Output.TEXT),
        (["status", "--output", "json"], Output.JSON),
        (["status", "--output", "text"], Output.TEXT),
        (["status", "-o", "json"], Output.JSON),
        (["-o", "json", "status"], Output.JSON),
        (["--output", "json", "incidents", "--all"], Output.JSON),
        (["show", "sdc-x", "--json"], Output.JSON),
        (["audit", "verify", "--all", "-o", "json"], Output.JSON),
    ],
)
def test_every_command_takes_output_json_or_text(argv, output):
    args = build_parser().parse_args(argv)

    assert args.output is output
    assert wants_json(args) is (output is Output.JSON)


def test_output_json_is_never_read_as_outputs():
    # Given --outputs (a file of stack outputs) and --output (what to print), side by side
    args = build_parser().parse_args(["status", "--output", "json", "--outputs", "out.json"])

    # Then each is itself
    assert (args.output, args.outputs) == (Output.JSON, "out.json")


@pytest.mark.parametrize("abbreviation", ["--outp", "--endpoint", "--reg", "--prof"])
def test_an_abbreviated_option_is_refused_not_guessed(abbreviation, capsys):
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["status", abbreviation, "x"])

    assert exited.value.code == 2
    assert "unrecognized arguments" in capsys.readouterr().err


def test_an_unknown_output_names_the_choices(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["status", "--output", "yaml"])

    assert "'yaml' is not an output: text or json" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("parser", "prog"), [(build_parser, "sdc"), (spool.build_parser, "sdc-replay-spool")]
)
def test_version_is_the_projects_one_version(parser, prog, capsys):
    with pytest.raises(SystemExit) as exited:
        parser().parse_args(["--version"])

    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"{prog} {__version__}"


def test_replay_spool_help_documents_every_option(capsys):
    parser = spool.build_parser()

    # argparse keeps what it was given in `_actions`: every option and the paths have a help
    undocumented = [a.dest for a in parser._actions if not (a.help or "").strip()]
    with pytest.raises(SystemExit):
        parser.parse_args(["--help"])
    shown = capsys.readouterr().out

    assert undocumented == []
    for option in ("--region", "--endpoint-url", "--event-bus", "--version", "PATH"):
        assert option in shown
    assert "$SDC_SPOOL_DIR" in shown and "Exit status" in shown


def _phony_targets() -> list[str]:
    makefile = (REPO / "Makefile").read_text()
    (line,) = re.findall(r"^\.PHONY:(.*)$", makefile, re.M)
    return line.split()


def test_make_help_lists_every_target_with_one_line():
    # When `make help` runs (it sets nothing up: no .venv, no node_modules)
    done = _make("help")

    # Then every phony target has exactly one line with a description, and nothing else is listed
    assert done.returncode == 0, done.stderr
    listed = dict(
        re.fullmatch(r"  (\S+) +(\S.*)", line).groups()  # type: ignore[union-attr]
        for line in done.stdout.splitlines()[1:]
    )
    assert sorted(listed) == sorted(_phony_targets())
    assert len(done.stdout.splitlines()) == len(listed) + 1


def _make(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "-s", "--no-print-directory", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_make_alone_prints_the_help_and_sets_nothing_up():
    alone, help_ = _make(), _make("help")

    assert alone.returncode == 0, alone.stderr
    assert alone.stdout == help_.stdout
    planned = _make("-n").stdout
    assert "-m venv" not in planned and "pip install" not in planned and "npm ci" not in planned
