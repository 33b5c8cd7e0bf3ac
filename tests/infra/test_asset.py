"""The Lambda asset: pip without Docker, rebuilt only when its inputs change, holding only what
the functions run."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from sdc_remediation.infra.local.fake_hyperpod import FakeHyperPod
from sdc_remediation.infra.local.lambda_context import LocalContext
from sdc_remediation.infra.stack import asset
from sdc_remediation.infra.stack.asset import LambdaAsset, build_lambda_asset
from tests.conftest import REPO

FUNCTIONS = asset.LAMBDAS_PACKAGE.replace(".", "/")
"""Where the functions' package lies in the asset (its import name as a path)."""
ABOVE_FUNCTIONS = {f"{FUNCTIONS.rpartition('/')[0]}/__init__.py"} if "/" in FUNCTIONS else set()
"""The `__init__.py` of the package above it, where it has one."""


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


class FakePip:
    """Stands in for pip: records the calls; `download` drops a wheel into --dest, `install`
    a package into --target (from --find-links only)."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, args: Sequence[str]) -> None:
        self.calls.append(list(args))
        if args[3] == "download":
            dest = Path(args[args.index("--dest") + 1])
            (dest / "boto3-1.44.5-py3-none-any.whl").write_text("wheel")
            return
        assert "--no-index" in args
        wheels = Path(args[args.index("--find-links") + 1])
        assert (wheels / "boto3-1.44.5-py3-none-any.whl").exists()
        target = Path(args[args.index("--target") + 1])
        (target / "boto3").mkdir(parents=True)
        (target / "boto3" / "__init__.py").write_text("__version__ = 'fake'\n")
        (target / "bin").mkdir()

    @property
    def commands(self) -> list[str]:
        return [call[3] for call in self.calls]


@pytest.fixture
def wheelhouse(tmp_path: Path) -> Path:
    return tmp_path / "wheelhouse"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for rel, text in {
        "lambdas/__init__.py": "",
        "lambdas/handlers/open_incident.py": "def handler(event, context): ...\n",
        "sdc_remediation/__init__.py": "",
        "trainer_emitter/__init__.py": "",
        "trainer_emitter/contract.py": "NAMESPACE = 'x'\n",
        "trainer_emitter/emitter.py": "",
        "trainer_emitter/checks/__init__.py": "",
        "trainer_emitter/py.typed": "",
        "trainer_emitter/schemas/sdc_report.v1.json": "{}",
        "infra/local/fake_hyperpod.py": "",
        "lambdas/__pycache__/junk.cpython-311.pyc": "junk",
        "tests/test_not_shipped.py": "",
    }.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_build_ships_the_lambda_code_the_contract_and_dependencies_only(
    repo: Path, wheelhouse: Path
):
    built = build_lambda_asset(
        repo / "build" / "asset", repo_root=repo, pip=FakePip(), wheelhouse=wheelhouse
    )

    assert _files(built.path) == {
        "boto3/__init__.py",
        f"{FUNCTIONS}/__init__.py",
        f"{FUNCTIONS}/handlers/open_incident.py",
        *ABOVE_FUNCTIONS,
        "trainer_emitter/__init__.py",
        "trainer_emitter/contract.py",
        "trainer_emitter/schemas/sdc_report.v1.json",
    }


def test_pip_fetches_the_pins_as_linux_wheels_for_the_runtime_python(repo: Path, wheelhouse: Path):
    pip = FakePip()
    build_lambda_asset(repo / "build" / "asset", repo_root=repo, pip=pip, wheelhouse=wheelhouse)

    assert pip.commands == ["download", "install"]
    for args in pip.calls:
        assert args[args.index("--platform") + 1] == "manylinux2014_x86_64"
        assert args[args.index("--python-version") + 1] == asset.PYTHON_VERSION
        assert args[args.index("--implementation") + 1] == "cp"
        assert "--only-binary=:all:" in args
        assert {
            "boto3==1.44.5",
            "botocore==1.44.5",
            "aws-lambda-powertools[tracer]==3.37.0",
        } <= set(args)


def test_a_fresh_tree_builds_from_the_wheelhouse_without_the_index(
    repo: Path, wheelhouse: Path, tmp_path: Path
):
    build_lambda_asset(
        repo / "build" / "asset", repo_root=repo, pip=FakePip(), wheelhouse=wheelhouse
    )
    pip = FakePip()

    built = build_lambda_asset(
        tmp_path / "clone" / "build" / "asset", repo_root=repo, pip=pip, wheelhouse=wheelhouse
    )

    assert pip.commands == ["install"]
    assert "--no-index" in pip.calls[0]
    assert (built.path / "boto3" / "__init__.py").exists()


def test_an_unchanged_tree_is_not_rebuilt(repo: Path, wheelhouse: Path):
    pip = FakePip()
    first = build_lambda_asset(
        repo / "build" / "asset", repo_root=repo, pip=pip, wheelhouse=wheelhouse
    )
    marker = first.path / "marker"
    marker.write_text("still here")

    second = build_lambda_asset(
        repo / "build" / "asset", repo_root=repo, pip=pip, wheelhouse=wheelhouse
    )

    assert second == first
    assert marker.exists()
    assert pip.commands == ["download", "install"]


def test_a_source_change_rebuilds_the_asset_but_reuses_the_dependencies(
    repo: Path, wheelhouse: Path
):
    pip = FakePip()
    first = build_lambda_asset(
        repo / "build" / "asset", repo_root=repo, pip=pip, wheelhouse=wheelhouse
    )
    handler = repo / "lambdas" / "handlers" / "open_incident.py"
    handler.write_text("def handler(event, context): return 1\n")

    second = build_lambda_asset(
        repo / "build" / "asset", repo_root=repo, pip=pip, wheelhouse=wheelhouse
    )

    assert second.key != first.key
    assert (
        second.path / FUNCTIONS / "handlers/open_incident.py"
    ).read_text() == handler.read_text()
    assert pip.commands == ["download", "install"]


def test_the_key_covers_file_names_not_only_contents(repo: Path):
    before = asset.asset_key(repo)
    (repo / "lambdas" / "handlers" / "open_incident.py").rename(
        repo / "lambdas" / "handlers" / "close_incident.py"
    )

    assert asset.asset_key(repo) != before


def test_a_pip_failure_is_reported_with_the_command(repo: Path, wheelhouse: Path):
    def failing(args: Sequence[str]) -> None:
        asset._run_pip([*args[:3], "--definitely-not-an-option"])

    with pytest.raises(RuntimeError, match="pip could not fetch or install"):
        build_lambda_asset(
            repo / "build" / "asset", repo_root=repo, pip=failing, wheelhouse=wheelhouse
        )


def test_the_real_asset_ships_a_boto3_that_knows_the_hyperpod_calls(lambda_asset: LambdaAsset):
    root = lambda_asset.path
    assert (root / "boto3-1.44.5.dist-info").is_dir()
    assert (root / "trainer_emitter" / "schemas" / "sdc_report.v1.json").is_file()
    assert (root / FUNCTIONS / "__init__.py").is_file()
    models = sorted((root / "botocore" / "data" / "sagemaker").glob("*/service-2.json*"))
    assert models, "botocore ships no SageMaker model"
    raw = models[-1].read_bytes()
    if models[-1].suffix == ".gz":
        import gzip

        raw = gzip.decompress(raw)
    operations = json.loads(raw)["operations"]
    assert {"StartClusterHealthCheck", "BatchReplaceClusterNodes"} <= set(operations)


CONTRACT = {
    "trainer_emitter/__init__.py",
    "trainer_emitter/contract.py",
    "trainer_emitter/schemas/sdc_report.v1.json",
    "trainer_emitter/schemas/sdc_report.v2.json",
}


def test_the_real_asset_ships_no_training_module_and_no_stand_in(lambda_asset: LambdaAsset):
    shipped = _files(lambda_asset.path)
    training_side = {
        p.relative_to(REPO).as_posix()
        for p in (REPO / "trainer_emitter").rglob("*.py")
        if "__pycache__" not in p.parts
    } - CONTRACT
    stand_ins = {FakeHyperPod.__name__, LocalContext.__name__}

    assert {p for p in shipped if p.startswith("trainer_emitter/")} == CONTRACT
    assert training_side
    assert not training_side & shipped
    assert not stand_ins & _classes_defined(lambda_asset.path / FUNCTIONS)


def _classes_defined(package: Path) -> set[str]:
    return {
        node.name
        for path in package.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef)
    }


IMPORT_FROM_THE_ASSET_ALONE = """
import importlib, json, os, pkgutil, sys, sysconfig

asset = os.path.join(sys.argv[1], "")
sys.path.insert(0, asset)
import sdc_remediation.lambdas
from trainer_emitter.contract import REPORT_SCHEMA_VERSIONS, report_schema

for version in REPORT_SCHEMA_VERSIONS:
    report_schema(version)
modules = [m.name for m in pkgutil.walk_packages(sdc_remediation.lambdas.__path__, "sdc_remediation.lambdas.")]
for name in modules:
    importlib.import_module(name)
stdlib = (sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"])
print(json.dumps({
    "modules": modules,
    "training_side": sorted(m for m in sys.modules if m.partition(".")[0] == "trainer_emitter"),
    "from_elsewhere": sorted(
        m.__file__ for m in list(sys.modules.values())
        if getattr(m, "__file__", None) and not m.__file__.startswith((asset, *stdlib))
    ),
}))
"""


def test_every_lambda_module_imports_from_the_asset_alone(lambda_asset: LambdaAsset):
    """No site-packages (-S), no environment or working directory (-I): only the asset and the
    standard library, as on Lambda; adapters the wiring imports on first use are covered too.
    No bytecode is written (-B): the session's asset is the one synth uploads."""
    done = subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            "-B",
            "-c",
            IMPORT_FROM_THE_ASSET_ALONE,
            str(lambda_asset.path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    handlers = {
        f"sdc_remediation.lambdas.handlers.{p.stem}"
        for p in (REPO / "lambdas/handlers").glob("[a-z]*.py")
    }
    assert handlers
    assert handlers <= set(found["modules"])
    assert found["training_side"] == ["trainer_emitter", "trainer_emitter.contract"]
    assert found["from_elsewhere"] == []


def test_the_real_asset_ships_the_validator_of_the_report_schema(lambda_asset: LambdaAsset):
    assert (lambda_asset.path / "fastjsonschema-2.22.3.dist-info").is_dir()


def test_the_real_asset_knows_the_approvers_time_zones_without_a_system_database(
    lambda_asset: LambdaAsset,
):
    # Given only the asset on the path and no system time zone database (as on the Amazon
    # Linux 2023 runtimes)
    code = (
        "import zoneinfo; zoneinfo.reset_tzpath([]);"
        "from sdc_remediation.lambdas.models.deadline import ApprovalDeadline;"
        "d = ApprovalDeadline('2026-12-06T08:15:04+00:00', 'Asia/Tokyo');"
        "print(d.local().isoformat())"
    )

    # When a deadline is put into a zone
    done = subprocess.run(
        [sys.executable, "-S", "-c", code],
        cwd=lambda_asset.path,
        env={"PYTHONPATH": str(lambda_asset.path)},
        capture_output=True,
        text=True,
        check=False,
    )

    # Then the asset's tzdata answers
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2026-12-06T17:15:04+09:00"


def _tree(root: Path) -> dict[str, float]:
    return {p.relative_to(root).as_posix(): p.stat().st_mtime for p in root.rglob("*")}


def test_the_asset_is_built_in_the_users_cache_and_nothing_is_written_beside_the_code(
    repo: Path, wheelhouse: Path, tmp_path: Path, monkeypatch
):
    # Given an install whose code must stay as it is (site-packages, read-only) and no override
    monkeypatch.delenv("SDC_ASSET_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    before = _tree(repo)

    # When the asset is built where the construct builds it (no folder given)
    built = build_lambda_asset(repo_root=repo, pip=FakePip(), wheelhouse=wheelhouse)

    # Then it lies in the user's cache, keyed by its inputs, and the code's folder is unchanged
    assert built.path == tmp_path / "cache" / "sdc-remediation" / f"lambda-asset-{built.key[:16]}"
    assert (built.path / FUNCTIONS / "handlers" / "open_incident.py").is_file()
    assert _tree(repo) == before


def test_sdc_asset_dir_moves_the_build(repo: Path, wheelhouse: Path, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("SDC_ASSET_DIR", str(tmp_path / "assets"))

    built = build_lambda_asset(repo_root=repo, pip=FakePip(), wheelhouse=wheelhouse)

    assert built.path.parent == tmp_path / "assets"


def test_an_asset_of_other_sources_unused_for_weeks_is_removed_when_another_is_built(
    repo: Path, wheelhouse: Path, tmp_path: Path, monkeypatch
):
    # Given an asset of older sources last used long ago, and one used recently
    import os
    import time

    monkeypatch.setenv("SDC_ASSET_DIR", str(tmp_path / "assets"))
    old = build_lambda_asset(repo_root=repo, pip=FakePip(), wheelhouse=wheelhouse)
    long_ago = time.time() - (asset.STALE_AFTER_DAYS + 1) * 86400
    os.utime(old.path.with_name(old.path.name + ".key"), (long_ago, long_ago))
    (repo / "lambdas" / "handlers" / "open_incident.py").write_text("# changed\n")
    recent = build_lambda_asset(repo_root=repo, pip=FakePip(), wheelhouse=wheelhouse)
    (repo / "lambdas" / "handlers" / "open_incident.py").write_text("# changed again\n")

    # When the sources change once more
    newest = build_lambda_asset(repo_root=repo, pip=FakePip(), wheelhouse=wheelhouse)

    # Then the one unused for weeks is gone, the recent one and the new one stay
    assert not old.path.exists()
    assert recent.path.is_dir() and newest.path.is_dir()
