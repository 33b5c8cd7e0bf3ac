"""The Lambda asset: pip without Docker, rebuilt only when its inputs change."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from infra import asset
from infra.asset import LambdaAsset, build_lambda_asset


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
        "trainer_emitter/__init__.py": "",
        "trainer_emitter/contract.py": "NAMESPACE = 'x'\n",
        "trainer_emitter/py.typed": "",
        "trainer_emitter/schemas/sdc_report.v1.json": "{}",
        "lambdas/__pycache__/junk.cpython-311.pyc": "junk",
        "tests/test_not_shipped.py": "",
    }.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_build_ships_sources_schemas_and_dependencies_without_caches(repo: Path, wheelhouse: Path):
    built = build_lambda_asset(
        repo / "build" / "asset", repo_root=repo, pip=FakePip(), wheelhouse=wheelhouse
    )

    shipped = {p.relative_to(built.path).as_posix() for p in built.path.rglob("*") if p.is_file()}
    assert shipped == {
        "boto3/__init__.py",
        "lambdas/__init__.py",
        "lambdas/handlers/open_incident.py",
        "trainer_emitter/__init__.py",
        "trainer_emitter/contract.py",
        "trainer_emitter/py.typed",
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
    assert (second.path / "lambdas/handlers/open_incident.py").read_text() == handler.read_text()
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
    assert (root / "lambdas" / "__init__.py").is_file()
    models = sorted((root / "botocore" / "data" / "sagemaker").glob("*/service-2.json*"))
    assert models, "botocore ships no SageMaker model"
    raw = models[-1].read_bytes()
    if models[-1].suffix == ".gz":
        import gzip

        raw = gzip.decompress(raw)
    operations = json.loads(raw)["operations"]
    assert {"StartClusterHealthCheck", "BatchReplaceClusterNodes"} <= set(operations)


def test_the_real_asset_ships_the_validator_of_the_report_schema(lambda_asset: LambdaAsset):
    assert (lambda_asset.path / "fastjsonschema-2.22.3.dist-info").is_dir()
