"""Counts the docs write in words ("fourteen Lambda functions", "two state machines") come from
the synthesized template: each claim names the phrase and what it counts, every place the phrase
appears must say the template's number, and a claim whose phrase is gone fails too (so a count
cannot drift out of the docs unnoticed, nor out of this test). Shown noticing on an edited copy.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sdc_remediation.infra.stack.settings import DeploymentSettings
from sdc_remediation.infra.stack.synth import synthesize_once
from sdc_remediation.infra.stack.template import resources_of_type
from tests.docs.test_tables_drift import FULL_CONTEXT

REPO = Path(__file__).resolve().parents[2]

WORDS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
]
NUMBER = r"(?P<n>" + "|".join(WORDS) + r"|\d+)"


def _value(word: str) -> int:
    return int(word) if word.isdigit() else WORDS.index(word.lower())


Template = dict[str, Any]


def _functions(template: Template) -> dict[str, dict[str, Any]]:
    """The pipeline's own functions (a handler under `sdc_remediation.lambdas.handlers`), not CDK's helpers."""
    return {
        logical_id: resource["Properties"]
        for logical_id, resource in resources_of_type(template, "AWS::Lambda::Function").items()
        if str(resource["Properties"].get("Handler", "")).startswith(
            "sdc_remediation.lambdas.handlers."
        )
    }


def _node_action_functions(template: Template) -> int:
    cap = DeploymentSettings().node_action_concurrency
    return sum(
        1 for p in _functions(template).values() if p.get("ReservedConcurrentExecutions") == cap
    )


def _unreserved_functions(template: Template) -> int:
    return sum(1 for p in _functions(template).values() if "ReservedConcurrentExecutions" not in p)


def _alarms_on_the_topic(template: Template) -> int:
    return sum(
        1
        for resource in resources_of_type(template, "AWS::CloudWatch::Alarm").values()
        if {"Ref": "NotificationTopic"} in resource["Properties"].get("AlarmActions", [])
    )


def _metrics_insights_alarms(template: Template) -> int:
    return sum(
        1
        for resource in resources_of_type(template, "AWS::CloudWatch::Alarm").values()
        if "SELECT " in json.dumps(resource["Properties"].get("Metrics", []))
    )


def _event_pattern_rules(template: Template) -> int:
    rules = resources_of_type(template, "AWS::Events::Rule").values()
    return sum(1 for rule in rules if "EventPattern" in rule["Properties"])


def _of_type(kind: str) -> Callable[[Template], int]:
    return lambda template: len(resources_of_type(template, kind))


@dataclass(frozen=True)
class Claim:
    document: str
    phrase: str
    """A regular expression with `NUMBER` where the count is written."""
    count: Callable[[Template], int]

    def found(self, text: str) -> list[int]:
        pattern = self.phrase.replace("NUMBER", NUMBER)
        return [_value(m["n"]) for m in re.finditer(pattern, text, re.IGNORECASE)]


CLAIMS = (
    Claim("README.md", r"\bNUMBER Lambda functions", lambda t: len(_functions(t))),
    Claim(
        "docs/deploy.md",
        r"\| functions \| `infra/stack/functions\.py` \| NUMBER functions",
        lambda t: len(_functions(t)),
    ),
    Claim("docs/deploy.md", r"\bthe NUMBER that change a node", _node_action_functions),
    Claim("docs/settings.md", r"\beach of the NUMBER functions that act on a node", _node_action_functions),
    Claim(
        "docs/deploy.md",
        r"\bthe NUMBER functions that neither take events in nor act on a node",
        _unreserved_functions,
    ),
    Claim("docs/deploy.md", r"\bNUMBER alarms on the pipeline itself", _alarms_on_the_topic),
    Claim("README.md", r"\bNUMBER Metrics Insights alarms", _metrics_insights_alarms),
    Claim("README.md", r"\bNUMBER EventBridge rules with", _event_pattern_rules),
    Claim("README.md", r"\bNUMBER DynamoDB tables", _of_type("AWS::DynamoDB::Table")),
    *(
        Claim(document, r"\bthe NUMBER state machines", _of_type("AWS::StepFunctions::StateMachine"))
        for document in ("docs/deploy.md", "docs/operate.md")
    ),
)  # fmt: skip


def drift(claim: Claim, text: str, template: Template) -> list[str]:
    """What the document says that the template does not (empty: in step)."""
    said = claim.found(text)
    if not said:
        return [f"{claim.document}: no {claim.phrase!r} any more: update the claim"]
    counted = claim.count(template)
    return [
        f"{claim.document}: {claim.phrase!r} says {n}, the template has {counted}"
        for n in said
        if n != counted
    ]


@pytest.fixture(scope="module")
def full_template() -> Template:
    return synthesize_once(FULL_CONTEXT).template


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: f"{c.document}:{c.phrase}")
def test_every_count_in_the_docs_is_the_templates(claim, full_template):
    text = (REPO / claim.document).read_text()

    assert drift(claim, text, full_template) == []


def test_a_count_changed_in_a_copy_of_the_doc_is_noticed(full_template):
    claim = CLAIMS[0]
    text = (REPO / claim.document).read_text()
    right = WORDS[claim.count(full_template)]
    wrong = WORDS[claim.count(full_template) - 1]

    changed = text.replace(f"{right} Lambda functions", f"{wrong} Lambda functions", 1)

    assert changed != text
    assert drift(claim, changed, full_template) == [
        f"README.md: {claim.phrase!r} says {claim.count(full_template) - 1}, the template has "
        f"{claim.count(full_template)}"
    ]


def test_a_claim_whose_phrase_is_gone_is_noticed(full_template):
    claim = CLAIMS[0]

    assert drift(claim, "nothing counted here", full_template) == [
        f"README.md: no {claim.phrase!r} any more: update the claim"
    ]


def test_a_count_the_template_changes_is_noticed(full_template):
    # Given the template with one pipeline function fewer
    fewer = json.loads(json.dumps(full_template))
    del fewer["Resources"][next(iter(_functions(fewer)))]

    text = (REPO / "README.md").read_text()

    assert drift(CLAIMS[0], text, fewer) != []
