"""The two distributions: the emitter alone for training images, the root project for deploying.

The emitter's (distributions/emitter/pyproject.toml) is built into a wheel and installed into a
fresh virtual environment; the root project's metadata is prepared and its `deploy` extra
resolved over the distributions installed here. Both offline: `--no-index`, no build isolation,
the build backend pinned in the `dev` extra.
"""

from __future__ import annotations

import email
import json
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
import venv
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import REPO

EMITTER_PROJECT = Path("distributions/emitter")
PIPELINE_PACKAGES = ("infra", "lambdas", "sdc_remediation")
NEVER_FOR_DEPLOY = ("torch", "triton")


def _copy(relative: Path | str, into: Path) -> None:
    source, target = REPO / relative, into / relative
    if source.is_dir():
        shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "build"))
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)


def _pip(*args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", *args],
        # a PYTHONPATH naming the work tree would show pip the project as installed already
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def _emitter_wheel(tmp_path: Path) -> Path:
    """The emitter's wheel, built from a copy of its project and the three package folders beside
    it (so a build never writes into the work tree, and a config that picked up the pipeline's
    packages would ship them here too)."""
    tree = tmp_path / "tree"
    for needed in (EMITTER_PROJECT, "trainer_emitter", *PIPELINE_PACKAGES):
        _copy(needed, tree)
    wheels = tmp_path / "wheels"
    _pip("wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", str(wheels),
         str(tree / EMITTER_PROJECT))  # fmt: skip
    (wheel,) = wheels.glob("*.whl")
    return wheel


def _wheel_metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return email.message_from_bytes(archive.read(name))


def test_a_fresh_venv_with_the_emitter_distribution_has_no_pipeline_package(tmp_path):
    # Given the emitter's wheel installed, without its dependencies, into a fresh venv
    wheel = _emitter_wheel(tmp_path)
    env = tmp_path / "venv"
    venv.create(env, with_pip=False)
    python = env / "bin" / "python"
    _pip("--python", str(python), "install", "--no-deps", "--no-index", "-q", str(wheel))

    # When that interpreter, isolated from the work tree, looks for the packages and reports an
    # alarm through the memory sink (no boto3 and no torch there: neither is needed for that)
    probe = textwrap.dedent(
        """
        import importlib.util, json, trainer_emitter
        emitter = trainer_emitter.setup(
            cluster_name="ml-cluster-1", region="us-west-2", sink=trainer_emitter.MemorySink(), rank=0
        )
        result = emitter.report({"step": 3, "check": "compute", "nonfinite": [0]})
        print(json.dumps({
            "found": {n: importlib.util.find_spec(n) is not None
                      for n in ("infra", "lambdas", "sdc_remediation", "torch",
                                "trainer_emitter")},
            "location": trainer_emitter.__file__,
            "version": trainer_emitter.__version__,
            "sent": sorted(result.sent),
        }))
        """
    )
    done = subprocess.run(
        [str(python), "-I", "-c", probe],
        cwd=tmp_path,
        env={
            "PATH": "/usr/bin:/bin",
            "SDC_SPOOL_DIR": str(tmp_path / "spool"),
            # rank 0 on a known instance: a rank mapped to none sends no datapoint
            "SDC_INSTANCE_ID": "i-0123456789abcdef0",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )

    # Then only the emitter is there, from the venv, and it works
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["found"] == {
        "infra": False,
        "lambdas": False,
        "sdc_remediation": False,
        "torch": False,
        "trainer_emitter": True,
    }
    assert seen["location"].startswith(str(env))
    assert seen["sent"] == ["event", "metrics"]
    # and of the two scripts only the emitter's
    assert (env / "bin" / "sdc-replay-spool").is_file()
    assert not (env / "bin" / "sdc").exists()


def test_the_emitter_wheel_holds_trainer_emitter_alone_with_the_root_projects_dependencies(
    tmp_path,
):
    # Given the emitter's wheel and the root project's declared dependencies
    wheel = _emitter_wheel(tmp_path)
    root = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]

    # When its file list and metadata are read
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/")[0] for name in archive.namelist()}
    meta = _wheel_metadata(wheel)

    # Then it ships one package, the schema with it, at the project's one version, and
    # depends on what the root project's emitter part depends on (its `torch` extra: numpy
    # only, torch being the training image's own)
    assert {t for t in tops if not t.endswith(".dist-info")} == {"trainer_emitter"}
    with zipfile.ZipFile(wheel) as archive:
        assert "trainer_emitter/schemas/sdc_report.v1.json" in archive.namelist()
    from trainer_emitter import __version__

    assert meta["Version"] == __version__
    requires = [Requirement(r) for r in meta.get_all("Requires-Dist") or ()]
    assert sorted(str(r) for r in requires if not r.marker) == sorted(
        str(Requirement(r)) for r in root["dependencies"]
    )
    assert [r.name for r in requires if r.marker] == ["numpy"]
    assert [str(Requirement(r)) for r in root["optional-dependencies"]["torch"]] == [
        str(Requirement(str(r).split(";")[0])) for r in requires if r.marker
    ]


METADATA_NEEDS = (
    "pyproject.toml",
    "README.md",
    "LICENSE",
    "trainer_emitter/__init__.py",
    "trainer_emitter/version.py",
)


def _prepare_metadata(tmp_path: Path, project: Path | str = ".") -> tuple[Path, str]:
    """The build backend's METADATA for a wheel of `project` (what pip resolves), prepared
    from a copy of what the metadata needs; with what the backend said on stderr."""
    tree = tmp_path / "tree"
    for needed in (
        *METADATA_NEEDS,
        *(EMITTER_PROJECT / n for n in ("pyproject.toml", "README.md")),
    ):
        if (REPO / needed).exists():
            _copy(needed, tree)
    out = tmp_path / "meta"
    out.mkdir()
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from setuptools import build_meta; "
            "print(build_meta.prepare_metadata_for_build_wheel(sys.argv[1]))",
            str(out),
        ],
        cwd=tree / project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    dist_info = done.stdout.strip().splitlines()[-1]
    return out / dist_info / "METADATA", done.stderr


def _root_metadata(tmp_path: Path) -> email.message.Message:
    """The root project's METADATA as its build backend writes it for a wheel."""
    path, _ = _prepare_metadata(tmp_path)
    return email.message_from_bytes(path.read_bytes())


@pytest.mark.parametrize("project", [".", EMITTER_PROJECT.as_posix()])
def test_the_projects_own_files_make_the_build_backend_warn_nothing(tmp_path, project):
    # Given either project's pyproject.toml
    # When its build backend prepares the wheel's metadata
    path, said = _prepare_metadata(tmp_path, project)

    # Then it warns nothing (no deprecated table), and the license is an SPDX expression
    assert "Warning" not in said, said
    meta = email.message_from_bytes(path.read_bytes())
    assert meta["License-Expression"] == "Apache-2.0"


def _closure(meta: email.message.Message, extra: str) -> set[str]:
    """The names of every distribution that installing the project with `extra` brings in,
    walked over the metadata of the distributions installed here (the dev environment holds
    them all)."""
    own = canonicalize_name(meta["Name"])
    own_requires = [Requirement(r) for r in meta.get_all("Requires-Dist") or ()]
    found: set[str] = set()
    pending: list[tuple[str, frozenset[str]]] = [(own, frozenset({extra}))]
    expanded: set[tuple[str, frozenset[str]]] = set()
    while pending:
        name, extras = pending.pop()
        if (name, extras) in expanded:
            continue
        expanded.add((name, extras))
        if name == own:
            requires = own_requires
        else:
            found.add(name)
            requires = [Requirement(r) for r in metadata.distribution(name).requires or ()]
        for req in requires:
            wanted = not req.marker or any(
                req.marker.evaluate({"extra": e}) for e in (extras or {""})
            )
            if wanted:
                pending.append((canonicalize_name(req.name), frozenset(req.extras)))
    return found


def test_the_deploy_extra_brings_in_neither_torch_nor_triton(tmp_path):
    # Given the root project's metadata
    meta = _root_metadata(tmp_path)

    # When its deploy and dev extras are resolved to the distributions they bring in
    deploy, dev = _closure(meta, "deploy"), _closure(meta, "dev")

    # Then deploy has what the stack imports at synth (the CDK, cdk-nag, Powertools, PyYAML for
    # the alert rules) and no GPU stack; dev holds deploy and the GPU stack
    assert {
        "aws-cdk-lib",
        "constructs",
        "cdk-nag",
        "aws-lambda-powertools",
        "boto3",
        "pyyaml",
    } <= deploy
    assert not {n for n in deploy if n in NEVER_FOR_DEPLOY or n.startswith("nvidia-")}
    assert deploy <= dev
    assert {"torch", "pytest", "moto"} <= dev


def test_the_root_project_and_the_emitter_share_the_one_version(tmp_path):
    from trainer_emitter import __version__

    assert _root_metadata(tmp_path)["Version"] == __version__
