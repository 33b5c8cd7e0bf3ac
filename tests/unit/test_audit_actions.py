"""The audit log's vocabulary: one list of actions (`AuditAction`), each written by some step,
and no action written as text, so grep finds every place an action is written."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

from sdc_remediation.lambdas.models.audit import AuditAction
from tests.conftest import REPO

DEFINED_IN = REPO / "lambdas" / "models" / "audit.py"


def _production(*packages: str) -> Iterator[tuple[Path, ast.AST]]:
    for package in packages:
        for path in sorted((REPO / package).rglob("*.py")):
            if path != DEFINED_IN:
                yield path, ast.parse(path.read_text())


def never_written(trees: Iterable[ast.AST]) -> list[str]:
    """The members no `AuditAction.<NAME>` attribute of the code names."""
    used = {
        node.attr
        for tree in trees
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == AuditAction.__name__
    }
    return sorted(a.name for a in AuditAction if a.name not in used)


def actions_as_text(tree: ast.AST) -> list[tuple[int, str]]:
    """Each `.audit(subject, action, ...)` call whose action is text the code spells (a string,
    an f-string, a concatenation, a `%` or `.format`), not an `AuditAction` member: line, source."""
    found = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "audit"
        ):
            continue
        given = [*node.args[1:2], *(k.value for k in node.keywords if k.arg == "action")]
        for action in given:
            branches = [action.body, action.orelse] if isinstance(action, ast.IfExp) else [action]
            if any(_spelled(branch) for branch in branches):
                found.append((node.lineno, ast.unparse(action)))
    return found


def _spelled(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant | ast.JoinedStr | ast.BinOp):
        return True
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
    )


def test_every_audit_action_is_written_by_some_step():
    never = never_written(tree for _, tree in _production("lambdas"))

    assert never == [], f"declared but never written (the docs would promise nothing): {never}"


def test_a_member_no_step_names_is_reported():
    steps = "\n".join(
        f"step.audit(i, AuditAction.{a.name})"
        for a in AuditAction
        if a is not AuditAction.NODE_GONE
    )

    assert never_written([ast.parse(steps)]) == ["NODE_GONE"]


def test_production_code_writes_no_audit_action_as_text():
    spelled = [
        f"{path.relative_to(REPO)}:{line}: {source}"
        for path, tree in _production("lambdas", "infra")
        for line, source in actions_as_text(tree)
    ]

    assert spelled == [], f"audit actions spelled as text, not AuditAction members: {spelled}"


def test_an_action_spelled_as_text_or_built_is_found():
    tree = ast.parse(
        "step.audit(i, 'node_gone')\n"
        "step.audit(i, f'{kind}_requested')\n"
        "step.audit(i, AuditAction.A if x else 'b')\n"
        "step.audit(i, action=kind + '_retry')\n"
        "step.audit(i, AuditAction.NODE_GONE)\n"
        "step.audit(i, action)\n"
    )

    assert [line for line, _ in actions_as_text(tree)] == [1, 2, 3, 4]


def test_each_value_is_its_member_name_in_lower_case():
    """A case-insensitive grep for an action as the log holds it finds the code that writes it."""
    assert [a.value for a in AuditAction] == [a.name.lower() for a in AuditAction]
