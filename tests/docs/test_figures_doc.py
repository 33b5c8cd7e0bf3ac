"""docs/figures.md shows the fleet figures' table derived from `sdc_remediation.lambdas.logic.core.figures.Figure`,
and docs/fleet.md the what-if's default history from `sdc_remediation.infra.local.fleet.causes`: each is defined
once, in the code, and the doc says the same."""

from __future__ import annotations

import dataclasses

from sdc_remediation.infra.local.fleet.causes import LLAMA3_405B, causes_table
from sdc_remediation.lambdas.logic.core.figures import figures_table
from tests.conftest import REPO

DOC = REPO / "docs" / "figures.md"


def shown_table(text: str) -> str:
    """The first Markdown table after the `## The figures` heading, as its lines."""
    lines = text.splitlines()
    start = lines.index("## The figures")
    table = []
    for line in lines[start + 1 :]:
        if line.startswith("|"):
            table.append(line)
        elif table:
            break
    return "\n".join(table)


def test_the_figures_table_of_the_doc_is_the_one_the_code_derives():
    assert shown_table(DOC.read_text()) == figures_table()


def test_a_definition_changed_in_the_doc_alone_is_drift():
    text = DOC.read_text().replace("incidents opened or held on arrival", "incidents opened", 1)

    assert shown_table(text) != figures_table()


FLEET = REPO / "docs" / "fleet.md"


def test_the_fleet_docs_causes_table_is_the_default_history_in_the_code():
    text = FLEET.read_text()

    assert causes_table() in text


def test_a_cause_changed_in_the_code_alone_is_drift():
    changed = (dataclasses.replace(LLAMA3_405B[0], count=147), *LLAMA3_405B[1:])

    assert causes_table(changed) not in FLEET.read_text()
