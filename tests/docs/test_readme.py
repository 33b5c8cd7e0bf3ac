"""The README a newcomer reads first, and the links of every document.

The README is at most 200 lines; its first screen gives the two set-up commands (`make drill`,
`make test`, the one CI runs); it has a start-here link per user; its diagram (`check: diagram`)
names exactly the functions of the synthesized stack (each as `λ <module>`) and only states of
its state machines (each node `(["<State>: ..."])`, whose function is the one the state
invokes). Every relative link of README.md, CHANGELOG.md and docs/*.md resolves, to a file and,
with `#anchor`, to one of its headings, and every repository path they name in code is there.
The README's fleet table is a dated what-if run, its columns the what-if's three ways. LICENSE
is the Apache License 2.0 that pyproject.toml names.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from sdc_remediation.infra.local.fleet.whatif import Mode
from sdc_remediation.infra.stack.synth import synthesize_once
from sdc_remediation.infra.stack.template import (
    pipeline_functions,
    placeholder_arns,
    state_machine_definitions,
)
from tests.conftest import REPO
from tests.docs.blocks import DOCUMENTS, Block, blocks_of
from tests.docs.test_tables_drift import FULL_CONTEXT

README = (REPO / "README.md").read_text()
MAX_README_LINES = 200
FIRST_SCREEN_LINES = 30
LINKED = (*DOCUMENTS, "CHANGELOG.md")
LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]+)\)")
NAMED_PATH = re.compile(
    r"`((?:infra|lambdas|trainer_emitter|distributions|sdc_remediation|tests|docs)/[\w./-]*)"
)
"""A repository path in a code span, up to its first placeholder (`lambdas/handlers/<module>.py`
names the folder)."""
FUNCTION = re.compile(r"λ ([a-z_]+)")
STATE_NODE = re.compile(r"\(\[\"([A-Za-z?]+)(?::([^\"]*))?\"\]\)")
DIAGRAMS = blocks_of("diagram")


def test_the_readme_is_at_most_200_lines():
    assert len(README.splitlines()) <= MAX_README_LINES


def test_the_first_screen_gives_the_two_set_up_commands_and_ci_runs_the_test_one():
    first_screen = "\n".join(README.splitlines()[:FIRST_SCREEN_LINES])
    block = next(b for b in blocks_of("make") if b.document == "README.md")
    commands = [line.split("#")[0].strip() for line in block.text.splitlines()]
    ci = (REPO / ".ci" / "run").read_text().strip().splitlines()

    assert block.text in first_screen
    assert commands == ["make drill", "make test"]
    assert ci[-1] == "make test"


@pytest.mark.parametrize(
    ("reader", "page"),
    [
        ("Training engineer", "docs/training.md"),
        ("Platform engineer", "docs/deploy.md"),
        ("On-call approver", "docs/approve.md"),
    ],
)
def test_the_readme_has_a_start_here_link_for_each_user(reader, page):
    start_here = README[README.index("## Start here") :].split("\n## ", 1)[0]
    entry = next(item for item in start_here.split("\n- ") if item.startswith(f"**{reader}**"))

    assert f"]({page})" in entry


# --- links ------------------------------------------------------------------------------------


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation but '-' and '_' dropped,
    spaces as '-'."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    found: set[str] = set()
    in_code = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            base = slug(line.lstrip("#"))
            name, n = base, 0
            while name in found:
                n += 1
                name = f"{base}-{n}"
            found.add(name)
    return found


def broken_links(document: str, text: str, root: Path = REPO) -> list[str]:
    """Each relative link of `text` (a document at `document`; its text may span lines) whose
    file, or heading, is not there. Code blocks hold no links."""
    lines, in_code = [], False
    for line in text.splitlines():
        fence = line.lstrip().startswith("```")
        in_code = in_code != fence
        lines.append("" if in_code or fence else line)
    prose = "\n".join(lines)
    found = []
    for match in LINK.finditer(prose):
        target = match[1]
        if re.match(r"^[a-z]+:", target):
            continue
        number = prose.count("\n", 0, match.start()) + 1
        path, _, anchor = target.partition("#")
        file = (root / document).parent / path if path else root / document
        if not file.exists():
            found.append(f"{document}:{number}: {target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text()):
            found.append(f"{document}:{number}: {target}: no such heading")
    return found


def test_every_relative_link_resolves_to_a_file_and_a_heading():
    found = [
        problem
        for document in LINKED
        for problem in broken_links(document, (REPO / document).read_text())
    ]

    assert found == []


def test_every_repository_path_a_document_names_in_code_is_there():
    # Given every document a newcomer reads
    # When each names a file or folder of the repository in a code span
    named = {
        f"{document}: {match[1]}"
        for document in LINKED
        for match in NAMED_PATH.finditer((REPO / document).read_text())
    }

    # Then the file or folder exists (a module moved into a package leaves no stale path)
    assert sorted(name for name in named if not (REPO / name.split(": ")[1]).exists()) == []
    assert len(named) > 50


@pytest.mark.parametrize(
    "link",
    [
        "[gone](docs/nothing.md)",
        "[gone](docs/approve.md#no-such-heading)",
        "[gone](#nowhere)",
        "[gone over\ntwo lines](docs/nothing.md)",
    ],
)
def test_a_link_to_a_missing_file_or_heading_is_found(link):
    text = README + f"\n{link}\n"

    assert len(broken_links("README.md", text)) == 1


def test_the_slug_of_a_heading_with_code_and_punctuation_is_githubs():
    assert slug("From a shell: `sdc approve`, `sdc reboot`, `sdc reject`") == (
        "from-a-shell-sdc-approve-sdc-reboot-sdc-reject"
    )


# --- LICENSE ------------------------------------------------------------------------------------


def test_the_license_is_the_apache_2_text_pyproject_names():
    text = (REPO / "LICENSE").read_text()
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    license_ = pyproject["project"]["license"]

    assert "Apache-2.0" in json.dumps(license_)
    assert text.lstrip().startswith("Apache License")
    assert "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert "APPENDIX: How to apply the Apache License to your work." in text


def test_the_readmes_fleet_table_is_a_dated_what_if_run_with_its_three_ways():
    # Given the README's section on what the pipeline is worth
    section = README.split("## What it is worth", 1)[1].split("\n## ", 1)[0]
    table = [line for line in section.splitlines() if line.startswith("|")]
    # Then it says the date of the run the table is from
    assert re.search(r"One run, \d{4}-\d{2}-\d{2}:", section)
    # and its columns are the what-if's ways through the history, its first row the ETTR
    assert [cell.strip() for cell in table[0].split("|")[1:-1]] == ["", *(m.value for m in Mode)]
    assert table[2].startswith("| ETTR |")


def test_the_changelog_has_an_unreleased_section_first():
    text = (REPO / "CHANGELOG.md").read_text()
    versions = re.findall(r"^## \[([^\]]+)\]", text, re.MULTILINE)

    assert versions[0] == "Unreleased"


# --- the diagram --------------------------------------------------------------------------------


def diagram_names(block: Block) -> tuple[set[str], dict[str, set[str]]]:
    """The functions a diagram names, and each state node's state → the functions in its node."""
    functions = set(FUNCTION.findall(block.text))
    states: dict[str, set[str]] = {}
    for state, rest in STATE_NODE.findall(block.text):
        states.setdefault(state, set()).update(FUNCTION.findall(rest or ""))
    return functions, states


def stack_names(template: dict[str, Any]) -> tuple[set[str], dict[str, set[str]]]:
    """The stack's function modules, and each state of its state machines → the function
    module it invokes (empty: none)."""
    functions = pipeline_functions(template)
    module = {
        logical_id: resource["Properties"]["Handler"].split(".")[-2]
        for logical_id, resource in functions.items()
    }
    by_arn = {arn: module[lid] for lid, arn in placeholder_arns(template).items() if lid in module}
    states: dict[str, set[str]] = {}

    def walk(machine: dict[str, Any]) -> None:
        for name, state in machine["States"].items():
            target = state.get("Parameters", {}).get("FunctionName", "")
            states[name] = {by_arn[target]} if target in by_arn else set()
            for branch in state.get("Branches", []):
                walk(branch)

    for definition in state_machine_definitions(template).values():
        walk(json.loads(definition))
    return set(module.values()), states


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    """Every optional function present (the idle sweep's among them)."""
    return synthesize_once(FULL_CONTEXT).template


def diagram_drift(block: Block, template: dict[str, Any]) -> list[str]:
    drawn_functions, drawn_states = diagram_names(block)
    functions, states = stack_names(template)
    found = []
    if drawn_functions != functions:
        found.append(
            f"functions: not drawn {sorted(functions - drawn_functions)}, "
            f"not in the stack {sorted(drawn_functions - functions)}"
        )
    for state, drawn in sorted(drawn_states.items()):
        if state not in states:
            found.append(f"state {state}: not in the state machines")
        elif drawn != states[state]:
            found.append(
                f"state {state}: drawn with {sorted(drawn)}, invokes {sorted(states[state])}"
            )
    return found


def test_the_readme_has_the_diagram_and_every_diagram_is_checked():
    assert [b.document for b in DIAGRAMS] == ["README.md"]


@pytest.mark.synth
@pytest.mark.parametrize("block", DIAGRAMS, ids=lambda b: b.id)
def test_the_diagram_names_the_stacks_functions_and_states(block, template):
    assert diagram_drift(block, template) == []


@pytest.mark.synth
@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("λ store_report", "λ open_incident"),  # a function left out
        ("λ verify_audit", "λ verify_audits"),  # a function the stack does not have
        ('(["IsolateNode:', '(["QuarantineNode:'),  # a state the machines do not have
        ("RebootNode: λ reboot_node", "RebootNode: λ replace_node"),  # the wrong function
    ],
)
def test_a_diagram_that_differs_from_the_stack_is_found(old, new, template):
    (block,) = DIAGRAMS
    changed = Block(block.document, block.line, block.lang, block.text.replace(old, new, 1), None)

    assert changed.text != block.text
    assert diagram_drift(changed, template) != []


# --- approving, told once -------------------------------------------------------------------------

APPROVE_PAGE = "docs/approve.md"
TELLS_APPROVING = re.compile(r"^#+ .*\bapprov(e|ing)\b", re.IGNORECASE)


def sections_on_approving(document: str, text: str) -> list[tuple[str, str]]:
    """(heading, body) of each section of `document` whose heading is about approving."""
    found = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if TELLS_APPROVING.match(line):
            level = len(line) - len(line.lstrip("#"))
            end = next(
                (
                    j
                    for j in range(i + 1, len(lines))
                    if lines[j].startswith("#")
                    and len(lines[j]) - len(lines[j].lstrip("#")) <= level
                ),
                len(lines),
            )
            found.append((line, "\n".join(lines[i + 1 : end])))
    return found


def told_elsewhere(document: str, text: str) -> list[str]:
    """The sections on approving outside the one page that do more than point at it."""
    target = (
        Path(APPROVE_PAGE).relative_to(Path(document).parent)
        if document == "README.md"
        else (Path(APPROVE_PAGE).name)
    )
    return [
        f"{document}: {heading}"
        for heading, body in sections_on_approving(document, text)
        if f"]({target}" not in body or "```" in body
    ]


def test_approving_is_told_on_one_page_and_the_others_link_it():
    found = [
        problem
        for document in DOCUMENTS
        if document != APPROVE_PAGE
        for problem in told_elsewhere(document, (REPO / document).read_text())
    ]

    assert found == []
    assert sections_on_approving(APPROVE_PAGE, (REPO / APPROVE_PAGE).read_text())


def test_a_second_telling_of_how_to_approve_is_found():
    text = "# Ops\n\n## Approve from the console\n\nPaste this:\n\n```json\n{}\n```\n"

    assert told_elsewhere("docs/operate.md", text) == [
        "docs/operate.md: ## Approve from the console"
    ]
