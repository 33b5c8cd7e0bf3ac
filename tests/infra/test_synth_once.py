"""`synthesize_once`: each context is synthesized once per set of inputs and read back after."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sdc_remediation.infra.stack import synth
from sdc_remediation.infra.stack.asset import LambdaAsset
from sdc_remediation.infra.stack.synth import Synthesized, inputs_key, synthesize_once


@pytest.fixture
def synthesized(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Stands in for the CDK synthesis: the contexts it was asked for, in order."""
    asked: list[dict[str, Any]] = []

    def synthesize(context: dict[str, Any], *, code_asset: LambdaAsset) -> Synthesized:
        asked.append(context)
        return Synthesized({"Context": context, "Asset": code_asset.key}, ["warning at x"])

    monkeypatch.setattr(synth, "synthesize", synthesize)
    return asked


def test_a_context_is_synthesized_once_and_then_read_back_equal(synthesized, tmp_path):
    asset = LambdaAsset(tmp_path, "asset-1")

    first = synthesize_once({"sdc:dryRun": True}, code_asset=asset, cache_dir=tmp_path / "c")
    again = synthesize_once({"sdc:dryRun": True}, code_asset=asset, cache_dir=tmp_path / "c")

    assert synthesized == [{"sdc:dryRun": True}]
    assert again == first
    assert again.nag_findings == ["warning at x"]


def test_each_distinct_context_is_synthesized_whatever_the_order_of_its_keys(synthesized, tmp_path):
    asset = LambdaAsset(tmp_path, "asset-1")

    synthesize_once({"a": 1, "b": 2}, code_asset=asset, cache_dir=tmp_path)
    synthesize_once({"b": 2, "a": 1}, code_asset=asset, cache_dir=tmp_path)
    synthesize_once({"a": 1, "b": 3}, code_asset=asset, cache_dir=tmp_path)

    assert synthesized == [{"a": 1, "b": 2}, {"a": 1, "b": 3}]


def test_another_asset_synthesizes_again_and_what_the_old_inputs_made_is_dropped(
    synthesized, tmp_path
):
    cache = tmp_path / "cache"
    synthesize_once({}, code_asset=LambdaAsset(tmp_path, "asset-1"), cache_dir=cache)

    new = synthesize_once({}, code_asset=LambdaAsset(tmp_path, "asset-2"), cache_dir=cache)

    assert len(synthesized) == 2
    assert new.template["Asset"] == "asset-2"
    kept = [path.name.split("-")[0] for path in cache.glob("*.json")]
    assert kept == [inputs_key(LambdaAsset(tmp_path, "asset-2"))[:16]]


def _infra(root: Path, app: str, local_run: str) -> None:
    (root / "infra" / "local").mkdir(parents=True, exist_ok=True)
    (root / "infra" / "stack").mkdir(parents=True, exist_ok=True)
    (root / "infra" / "stack" / "stack.py").write_text(app)
    (root / "infra" / "local" / "run.py").write_text(local_run)


def test_the_inputs_are_the_app_sources_but_not_the_local_run(monkeypatch, tmp_path):
    monkeypatch.setattr(synth, "REPO_ROOT", tmp_path)
    asset = LambdaAsset(tmp_path, "asset-1")
    _infra(tmp_path, "bucket = 1", "wait = 1")
    before = inputs_key(asset)

    _infra(tmp_path, "bucket = 1", "wait = 2")
    local_run_changed = inputs_key(asset)
    _infra(tmp_path, "bucket = 2", "wait = 2")
    app_changed = inputs_key(asset)

    assert local_run_changed == before
    assert app_changed != before
