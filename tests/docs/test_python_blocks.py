"""The Python blocks, run as a reader would run them.

`python emitter`: the training doc's emitter calls (docs/training.md), in order, in one fresh interpreter (a fresh one is
what shows a broken import), with the `memory` sink and a one-rank job's alarm.
`python watch`: the training watch's blocks, in a fresh interpreter, against a rendezvous store
this test starts (a one-rank job: MASTER_ADDR and MASTER_PORT name it).
`python checks`: the training-loop blocks on every rank of a 4-rank gloo job (tests/docs/ranks.py).
`python synth`, `python construct` and `python local`: the infra blocks, each in a fresh
interpreter in the repository, the last against the local account.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from tests.conftest import REPO
from tests.docs.blocks import Block, blocks_of

PYTHON = blocks_of("python")
SESSIONS = ("emitter", "watch", "checks", "synth", "construct", "local")


def session(name: str) -> list[Block]:
    return [b for b in PYTHON if b.argument == name]


def run_fresh(
    code: str, env: dict[str, str] | None = None, timeout: float = 300, cwd: Any = REPO
) -> str:
    import os

    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
    )
    assert done.returncode == 0, f"{code}\n--- stderr ---\n{done.stderr[-4000:]}"
    return done.stdout


def program(blocks: list[Block], prelude: str = "", postlude: str = "") -> str:
    parts = [textwrap.dedent(prelude)]
    for block in blocks:
        parts.append(f"# --- {block.id}\n{block.text}\n")
    parts.append(textwrap.dedent(postlude))
    return "\n".join(parts)


def test_every_python_block_belongs_to_a_session():
    assert {b.argument for b in PYTHON} == set(SESSIONS)


ONE_RANK_ALARM = {
    "step": 30,
    "check": "compute",
    "nonfinite": [0],
    "mismatched_pairs": [],
    "culprits": [],
    "verdicts": [],
    "suspect_window": [21, 30],
    "last_audit_pass": 20,
    "last_weight_check_pass": 20,
}


def test_the_emitter_blocks_run_in_a_fresh_interpreter_and_report():
    # Given the training doc's emitter blocks, a one-rank job's alarm and the memory sink
    blocks = session("emitter")
    prelude = f"alarm = {ONE_RANK_ALARM!r}\n"
    postlude = """
        import json
        print(json.dumps({"sent": result.sent, "errors": result.errors,
                          "datapoints": [d.to_json() for d in result.datapoints]}))
    """

    # When they run in order in a fresh interpreter
    out = run_fresh(
        program(blocks, prelude, postlude),
        env={
            "SDC_SINK": "memory",
            "AWS_REGION": "us-west-2",
            "NODE_NAME": "hyperpod-i-0bb00000000000002",
        },
    )

    # Then the report went out: the metric for this rank's instance and the event
    seen = json.loads(out.splitlines()[-1])
    assert seen["errors"] == []
    assert sorted(seen["sent"]) == ["event", "metrics"]
    assert [(d["metric"], d["instance_id"]) for d in seen["datapoints"]] == [
        ("sdc_nonfinite_grad", "i-0bb00000000000002")
    ]


@pytest.mark.torch
def test_the_watch_blocks_run_in_a_fresh_interpreter_and_watch_every_step():
    # Given the training doc's watch blocks, a rendezvous store, a one-rank job and the memory sink
    from torch.distributed import TCPStore

    server = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    prelude = """
        steps = 7
        batches = iter(range(100))
        model = {"weights": 0}
        def train_step(model, batch):
            model["weights"] += batch
        def save_checkpoint(model):
            pass
    """
    postlude = """
        import json
        print(json.dumps({"last_step": watch.hang.last_step, "verdicts": len(watch.hang.verdicts),
                          "sections": sorted(watch._sections), "weights": model["weights"]}))
    """

    # When they run in order in a fresh interpreter
    out = run_fresh(
        program(session("watch"), prelude, postlude),
        env={
            "SDC_SINK": "memory",
            "AWS_REGION": "us-west-2",
            "NODE_NAME": "hyperpod-i-0bb00000000000002",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(server.port),
        },
    )

    # Then every step was marked, every section timed, nothing judged a hang
    seen = json.loads(out.splitlines()[-1])
    assert seen == {
        "last_step": 7,
        "verdicts": 0,
        "sections": ["checkpoint_save", "data_loading", "forward_backward"],
        "weights": sum(range(7)),
    }


@pytest.mark.torch
def test_the_training_loop_blocks_run_on_every_rank_of_a_gloo_job():
    from tests.docs.ranks import worker
    from tests.torch.harness import run_on_ranks

    blocks = session("checks")

    seen = run_on_ranks(
        worker,
        ([(b.id, b.text) for b in blocks],),
        [b.id for b in blocks],
        timeout=300,
        what="the training doc's training blocks",
    )

    # Every block ran on every rank, and the collectives gave every rank the same answer
    for block in blocks:
        assert all(r is not None for r in seen[block.id]), block.id
        assert all(r == seen[block.id][0] for r in seen[block.id]), (block.id, seen[block.id])
    # The copies agree after a clean load, so nobody is named
    verdicts = [s[0]["verdict"] for s in seen.values() if "verdict" in s[0]]
    assert verdicts and all(v == {"suspects": [], "agreement": "agree"} for v in verdicts)
    # The restart block resumed from the clean checkpoint before the alarm's window, not the
    # newer one saved inside it (tests/docs/ranks.py lays the directory out)
    assert [s[0]["resumed_from"] for s in seen.values() if "resumed_from" in s[0]] == [1000]


@pytest.mark.synth
def test_the_synth_block_runs_in_a_fresh_interpreter():
    (block,) = session("synth")
    postlude = """
        assert json.loads(definitions["RemediationStateMachine"])["States"]
        assert function_handlers(template)["OpenIncidentFunction"] == "sdc_remediation.lambdas.handlers.open_incident.handler"
        print("ok")
    """

    out = run_fresh(program([block], "import json\n", postlude))

    assert out.splitlines()[-1] == "ok"


@pytest.mark.synth
def test_the_construct_block_puts_the_pipeline_beside_a_stack_of_the_readers(tmp_path):
    (block,) = session("construct")
    postlude = """
        stacks = {s.stack_name: s.template for s in assembly.stacks}
        machines = [
            r["Properties"]["StateMachineName"]
            for r in stacks["MlPlatform"]["Resources"].values()
            if r["Type"] == "AWS::StepFunctions::StateMachine"
        ]
        print(json.dumps({"stacks": sorted(stacks), "machines": sorted(machines)}))
    """

    out = run_fresh(program([block], "import json\n", postlude), timeout=600)

    assert json.loads(out.splitlines()[-1]) == {
        "stacks": ["MlPlatform", "TeamTraining"],
        "machines": ["MlPlatformSdc-approval", "MlPlatformSdc-remediation"],
    }


@pytest.mark.slow
@pytest.mark.synth
def test_the_local_run_block_approves_through_the_cli(tmp_path):
    (block,) = session("local")
    postlude = """
        print(json.dumps({"status": status, "state": incident.state.value}))
    """

    out = run_fresh(program([block], "", postlude), timeout=600, cwd=tmp_path)

    seen = json.loads(out.splitlines()[-1])
    assert seen == {"status": 0, "state": "replaced"}
