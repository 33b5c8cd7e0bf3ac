"""The deploy extra is what a team's own CDK app needs, and nothing beside the code is written.

The root project's wheel is built from a copy of the tree and installed with its `deploy` extra
alone into a fresh virtual environment, offline (`--no-index`): from a wheelhouse kept in the
user's cache, as the Lambda asset's is, filled by `pip download` the first time (the one step
that needs the package index). In that environment a team's app with an `infra/` package of its
own, holding its own stack with the construct in it, is synthesized; the installed package is
made read-only first and checked unchanged after. The outputs file a deploy would write for
that app is then read the way `sdc --outputs FILE` reads it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
import tomllib
import venv
from pathlib import Path

import pytest

from sdc_remediation.infra.cli import deployment
from sdc_remediation.infra.stack.asset import asset_root
from tests.conftest import REPO
from tests.infra.template_tools import deploy_outputs, resolved
from tests.unit.test_distributions import _pip

pytestmark = [pytest.mark.slow, pytest.mark.synth]

TREE = ("pyproject.toml", "README.md", "LICENSE", "trainer_emitter", "infra", "lambdas")
PACKAGE = "sdc_remediation"
TEAM_STACK = "TeamTraining"

TEAM_PACKAGE = {
    "infra/__init__.py": '"""The team\'s own infrastructure package."""\n',
    "infra/training.py": textwrap.dedent(
        """
        from aws_cdk import Stack
        from aws_cdk import aws_sqs as sqs
        from constructs import Construct

        from sdc_remediation import SdcRemediation, SdcRemediationProps


        class TrainingStack(Stack):
            \"\"\"The team's stack: a queue of its own, and the pipeline beside it.\"\"\"

            def __init__(self, scope: Construct, construct_id: str) -> None:
                super().__init__(scope, construct_id)
                sqs.Queue(self, "Jobs", enforce_ssl=True)
                SdcRemediation(
                    self,
                    "Sdc",
                    props=SdcRemediationProps(
                        clusters={"ml-cluster-1": "ab12cd34ef56"}, dry_run=True
                    ),
                )
        """
    ),
    "app.py": textwrap.dedent(
        f"""
        import sys

        from aws_cdk import App

        from infra.training import TrainingStack

        app = App(outdir=sys.argv[1])
        TrainingStack(app, "{TEAM_STACK}")
        app.synth()
        """
    ),
}


def _root_wheel(tmp_path: Path) -> Path:
    """The root project's wheel, built from a copy of the tree (links kept as links)."""
    tree = tmp_path / "tree"
    for name in (*TREE, PACKAGE):
        source = REPO / name
        if source.is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "build")
            shutil.copytree(source, tree / name, symlinks=True, ignore=ignore)
        elif source.exists():
            tree.mkdir(exist_ok=True)
            shutil.copy2(source, tree / name)
    wheels = tmp_path / "wheels"
    _pip("wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", str(wheels),
         str(tree))  # fmt: skip
    (wheel,) = wheels.glob("*.whl")
    return wheel


def _deploy_wheelhouse(wheel: Path) -> Path:
    """The wheels the deploy extra brings in, kept in the user's cache under a hash of the
    project's requirements; downloaded the first time only."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["deploy"]]
    key = hashlib.sha256("\n".join([sys.version[:4], *wanted]).encode()).hexdigest()[:16]
    wheelhouse = asset_root() / "deploy-wheels" / key
    if not (wheelhouse / ".complete").is_file():
        shutil.rmtree(wheelhouse, ignore_errors=True)
        _pip("download", "-q", "--dest", str(wheelhouse), f"{wheel}[deploy]")
        for own in wheelhouse.glob(f"{PACKAGE}-*.whl"):
            own.unlink()
        (wheelhouse / ".complete").write_text(key + "\n")
    return wheelhouse


def _snapshot(root: Path) -> dict[str, tuple[int, float]]:
    return {
        p.relative_to(root).as_posix(): (p.stat().st_size, p.stat().st_mtime)
        for p in root.rglob("*")
    }


def _read_only(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def test_a_venv_with_the_deploy_extra_alone_synthesizes_a_team_app_with_its_own_infra(
    tmp_path,
):
    # Given a fresh venv with the project's wheel and its deploy extra only, installed offline
    wheel = _root_wheel(tmp_path)
    wheelhouse = _deploy_wheelhouse(wheel)
    env = tmp_path / "venv"
    venv.create(env, with_pip=True)
    python = env / "bin" / "python"
    _pip("--python", str(python), "install", "-q", "--no-index", "--find-links",
         str(wheelhouse), f"{wheel}[deploy]")  # fmt: skip
    site = Path(
        subprocess.check_output(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            text=True,
        ).strip()
    )
    assert not (site / "torch").exists() and not (site / "pytest").exists()
    # and the installed package made read-only
    installed = site / PACKAGE
    _read_only(installed)
    before = _snapshot(site)

    # And a team's app with an `infra/` package of its own, the construct in its stack
    app = tmp_path / "team-app"
    for relative, text in TEAM_PACKAGE.items():
        (app / relative).parent.mkdir(parents=True, exist_ok=True)
        (app / relative).write_text(text)
    node = shutil.which("node")
    assert node, "synthesizing needs Node.js"
    carried = ("HOME", "XDG_CACHE_HOME", "SDC_ASSET_DIR", "SDC_WHEELHOUSE")

    # When that app is synthesized with the venv's Python, no bytecode written
    done = subprocess.run(
        [str(python), "-B", "-s", "app.py", str(tmp_path / "cdk.out")],
        cwd=app,
        env={
            "PATH": os.pathsep.join([str(env / "bin"), str(Path(node).parent), "/usr/bin:/bin"]),
            "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
            "JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION": "1",
            **{name: os.environ[name] for name in carried if name in os.environ},
        },
        capture_output=True,
        text=True,
        timeout=600,
    )

    # Then it synthesizes, from the venv's package, and wrote nothing into the install
    assert done.returncode == 0, done.stderr[-4000:]
    assert _snapshot(site) == before
    template = json.loads((tmp_path / "cdk.out" / f"{TEAM_STACK}.template.json").read_text())
    resources = template["Resources"].values()
    assert {"AWS::SQS::Queue", "AWS::Lambda::Function"} <= {r["Type"] for r in resources}

    # And the outputs file a deploy writes for that app gives sdc the construct's addresses
    written = tmp_path / "cdk-outputs.json"
    written.write_text(json.dumps({TEAM_STACK: deploy_outputs(template)}))
    found = deployment.from_file(written)
    table = next(
        logical
        for logical, r in template["Resources"].items()
        if r["Type"] == "AWS::DynamoDB::Table" and "Incidents" in logical
    )
    assert found.incidents_table == resolved(template, {"Ref": table})
    assert found.source == f"stack {TEAM_STACK} in outputs file {written}"
    # and so does the venv's own sdc, the deploy extra's only: the same lookup from the install
    lookup = (
        "import json, pathlib, sys\n"
        "from sdc_remediation.infra.cli.deployment import from_file\n"
        "found = from_file(pathlib.Path(sys.argv[1]))\n"
        "print(json.dumps([found.source, found.incidents_table]))\n"
    )
    clean = {"PATH": f"{env / 'bin'}:/usr/bin:/bin"}
    seen = subprocess.run(
        [str(python), "-B", "-s", "-c", lookup, str(written)],
        cwd=tmp_path, env=clean, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert seen.returncode == 0, seen.stderr[-3000:]
    assert json.loads(seen.stdout) == [found.source, found.incidents_table]
    usage = subprocess.run(
        [str(env / "bin" / "sdc"), "--outputs", str(written), "--help"],
        env=clean, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert usage.returncode == 0 and "--outputs" in usage.stdout, usage.stderr[-3000:]
    # And the fleet what-if runs from the install, on a team's own history: nothing it needs
    # is in the tests or needs Node.js
    history = tmp_path / "ours.csv"
    history.write_text(
        "cause,count,signal,delay_seconds,hyperpod_sees,node_fault,rule\n"
        "bad GPU,2,hardware alert,60,true,true,critical_xid\n"
    )
    fleet = subprocess.run(
        [str(python), "-B", "-s", "-m", "sdc_remediation.infra.local.fleet", "--history",
         str(history), "--days", "1", "--nodes", "8", "--out", str(tmp_path / "fleet")],
        cwd=tmp_path, env=clean, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert fleet.returncode == 0, fleet.stderr[-3000:]
    assert "| ETTR |" in fleet.stdout and "Node" not in fleet.stderr
    assert (tmp_path / "fleet" / "pipeline.jsonl").is_file()
