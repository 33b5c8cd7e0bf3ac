"""The tables the docs show of something the code holds, each compared with its code source.

One function per table, taking the document's text and the code's value, returning what
differs (empty: in step). tests/docs/test_tables_drift.py runs each on the real pair, and on
pairs changed on one side only to show that the comparison notices.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from sdc_remediation.infra.stack import settings_table
from sdc_remediation.infra.stack.functions import SPECS, SWEEP
from sdc_remediation.infra.stack.template import pipeline_functions, resources_of_type
from sdc_remediation.lambdas.models.setting_declarations import Setting
from trainer_emitter.mapping import Attribution

ROW_SPLIT = re.compile(r"(?<!\\)\|")
TICKED = re.compile(r"`([^`]+)`")
IAM_ACTION = re.compile(r"^[a-z0-9-]+:[A-Z][A-Za-z]+$")
EVERY_FUNCTION = "every function"
FINAL = "final"


def table_after(text: str, heading: str) -> list[list[str]]:
    """The data rows (cells stripped) of the first table after the line that starts with
    `heading`; AssertionError when there is no such line or no table after it."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(heading)]
    assert starts, f"no line starts with {heading!r}"
    rows: list[list[str]] = []
    for line in lines[starts[0] + 1 :]:
        if line.startswith("|"):
            rows.append([cell.strip() for cell in ROW_SPLIT.split(line.strip())[1:-1]])
        elif rows:
            break
    assert len(rows) > 2, f"no table after {heading!r}"
    return rows[2:]  # the header and the |---| line


def ticked(cell: str) -> list[str]:
    return TICKED.findall(cell)


def _differences(what: str, documented: Iterable[str], in_code: Iterable[str]) -> list[str]:
    documented, in_code = set(documented), set(in_code)
    found = []
    if in_code - documented:
        found.append(f"{what}: in the code, not in the doc: {sorted(in_code - documented)}")
    if documented - in_code:
        found.append(f"{what}: in the doc, not in the code: {sorted(documented - in_code)}")
    return found


# --- (a) docs/settings.md, the one settings table vs the declaration of the settings -----------


def settings_table_drift(doc: str, settings: Iterable[Setting]) -> list[str]:
    """The generated table as the doc holds it against the table the declaration gives, row by
    row (`python -m sdc_remediation.infra.stack.settings_table --write` puts it right)."""
    documented = settings_table.documented(doc).splitlines()
    expected = settings_table.settings_table(settings).splitlines()
    found = [
        f"line {i + 1}: the doc has {d!r}, the declaration gives {e!r}"
        for i, (d, e) in enumerate(zip(documented, expected, strict=False))
        if d != e
    ]
    if len(documented) != len(expected):
        found.append(f"{len(documented)} lines in the doc, {len(expected)} from the declaration")
    return found


def environment_settings_drift(doc: str, settings: Iterable[Setting]) -> list[str]:
    """Each variable of the environment table that carries settings names exactly those
    settings' keys, and restates no default (the settings table has them)."""
    carried: dict[str, set[str]] = {}
    for setting in settings:
        if setting.env is not None:
            carried.setdefault(setting.env.value, set()).add(setting.key)
    rows = {ticked(row[0])[0]: row[2] for row in table_after(doc, ENVIRONMENT_HEADING)}
    found = []
    for name in sorted(rows.keys() & carried.keys()):
        named = {token for token in ticked(rows[name]) if token.startswith("sdc:")}
        found.extend(_differences(f"settings {name} carries", named, carried[name]))
        if "default" in rows[name]:
            found.append(f"{name}: the environment table restates a default")
    return found


# --- (b) docs/training.md, "What a report publishes" vs trainer_emitter/mapping.py `Attribution` ---------

MAPPING_HEADING = "### What a report publishes"


def rule_row(rule: Attribution) -> list[str]:
    """A rule as the training doc's table shows it: evidence | role[: scope] | metric."""
    role = f"{rule.role.value}: {rule.scope}" if rule.scope else rule.role.value
    return [rule.evidence, role, f"`{rule.metric.value}`"]


def report_mapping_drift(readme: str, rules: Iterable[Attribution]) -> list[str]:
    """The training doc's rows against the rules, row by row in order."""
    documented = table_after(readme, MAPPING_HEADING)
    expected = [rule_row(rule) for rule in rules]
    found = []
    for position in range(max(len(documented), len(expected))):
        doc_row = documented[position] if position < len(documented) else None
        code_row = expected[position] if position < len(expected) else None
        if doc_row != code_row:
            found.append(f"row {position + 1}: the doc has {doc_row}, the code {code_row}")
    return found


# --- (c) docs/deploy.md, "IAM, function by function" vs the synthesized roles ---------------------

PERMISSIONS_HEADING = "## IAM, function by function"
SAME_AS = re.compile(r"^the same as `([a-z_]+)`")


def function_modules(template: Mapping[str, Any]) -> dict[str, str]:
    """Function logical id → its handler module (`sdc_remediation.lambdas.handlers.<module>.handler`)."""
    return {
        logical_id: resource["Properties"]["Handler"].split(".")[-2]
        for logical_id, resource in pipeline_functions(template).items()
    }


def granted_actions(template: Mapping[str, Any]) -> dict[str, set[str]]:
    """Function module → the IAM actions its role allows beyond what every function's does."""
    by_role: dict[str, set[str]] = {}
    for policy in resources_of_type(template, "AWS::IAM::Policy").values():
        allowed = {
            action
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]
            if statement["Effect"] == "Allow"
            for action in (
                statement["Action"]
                if isinstance(statement["Action"], list)
                else [statement["Action"]]
            )
        }
        for role in policy["Properties"].get("Roles", []):
            by_role.setdefault(role["Ref"], set()).update(allowed)
    granted = {
        module: by_role.get(
            template["Resources"][logical_id]["Properties"]["Role"]["Fn::GetAtt"][0], set()
        )
        for logical_id, module in function_modules(template).items()
    }
    # What every pipeline function's role allows (the idle sweep's among them); the dashboard's
    # page holds none of it, so its row lists all its role allows.
    pipeline = {spec.module for spec in (*SPECS, SWEEP)}
    common = set.intersection(*(actions for m, actions in granted.items() if m in pipeline))
    return {
        module: actions - common if module in pipeline else actions
        for module, actions in granted.items()
    }


def permissions_drift(doc: str, granted: Mapping[str, set[str]]) -> list[str]:
    """Each row's IAM actions (in backticks, `service:Action`; "the same as `<function>`" for
    another row's) against what the function's role allows beyond the common grants. The common
    grants (what every role has: logs, X-Ray, metrics, the tables) are said in the section's prose
    and not compared here: a new one shows in every row of the IAM tests instead."""
    rows = {ticked(row[0])[0]: row[1] for row in table_after(doc, PERMISSIONS_HEADING)}
    found = _differences("functions", rows, granted)
    for module in sorted(rows.keys() & granted.keys()):
        text = rows[module]
        same = SAME_AS.match(text)
        if same:
            text = rows.get(same[1], "")
        documented = {token for token in ticked(text) if IAM_ACTION.match(token)}
        found.extend(_differences(f"{module}'s actions", documented, granted[module]))
    return found


# --- (d) docs/pipeline.md, the functions' environment vs the synthesized functions ----------------

ENVIRONMENT_HEADING = "Environment: read once"


def function_environment(template: Mapping[str, Any]) -> dict[str, set[str]]:
    """Function module → the names of the environment variables the stack gives it."""
    functions = pipeline_functions(template)
    return {
        module: set(functions[logical_id]["Properties"]["Environment"]["Variables"])
        for logical_id, module in function_modules(template).items()
    }


def environment_drift(doc: str, environment: Mapping[str, set[str]]) -> list[str]:
    """Each variable's functions ("every function", or the modules in backticks) against the
    functions the stack gives it to."""
    modules = set(environment)
    getting: dict[str, set[str]] = {}
    for module, names in environment.items():
        for name in names:
            getting.setdefault(name, set()).add(module)
    rows = {ticked(row[0])[0]: row[1] for row in table_after(doc, ENVIRONMENT_HEADING)}
    found = _differences("variables", rows, getting)
    for name in sorted(rows.keys() & getting.keys()):
        cell = rows[name]
        documented = modules if cell == EVERY_FUNCTION else set(ticked(cell))
        found.extend(_differences(f"functions given {name}", documented, getting[name]))
    return found


# --- (e) docs/pipeline.md, the incident states vs lambdas/logic/core/lifecycle.py ---------------------

STATES_HEADING = "Incident states (`IncidentState`"


def states_drift(
    doc: str,
    transitions: Mapping[Any, Iterable[Any]],
    terminal: Iterable[Any],
    states: Iterable[Any],
) -> list[str]:
    """Each state's row: where it may go (`TRANSITIONS`) or "final" (a terminal state)."""
    rows = {ticked(row[0])[0]: row[1] for row in table_after(doc, STATES_HEADING)}
    names = {str(state) for state in states}
    final = {str(state) for state in terminal}
    moves = {
        str(state): {str(target) for target in targets} for state, targets in transitions.items()
    }
    found = _differences("states", rows, names)
    for state in sorted(rows.keys() & names):
        cell = rows[state]
        if cell == FINAL:
            if state not in final or moves.get(state):
                found.append(
                    f"{state}: final in the doc; in the code terminal: {state in final}, "
                    f"goes to {sorted(moves.get(state, ()))}"
                )
        else:
            found.extend(_differences(f"{state} goes to", ticked(cell), moves.get(state, set())))
            if state in final:
                found.append(f"{state}: terminal in the code, the doc moves it on")
    return found


# --- docs/deploy.md, "Hardware alerts" vs infra/stack/alert_rules.py `THRESHOLD_KEYS` -------------

THRESHOLDS_HEADING = "Thresholds and windows, `sdc:hardwareAlerts`"


def thresholds_drift(doc: str) -> list[str]:
    """The thresholds table against `THRESHOLD_KEYS` and `Thresholds`: keys, defaults, ranges,
    reasons, row by row."""
    from sdc_remediation.infra.stack.alert_rules import (
        CRITICAL_XIDS_KEY,
        CRITICAL_XIDS_REASON,
        THRESHOLD_KEYS,
        Thresholds,
    )

    defaults = Thresholds()
    expected = [
        [
            f"`{key}`",
            f"`{getattr(defaults, spec.attr)}`",
            f"{spec.unit}, {spec.low} .. {spec.high}",
            spec.reason,
        ]
        for key, spec in THRESHOLD_KEYS.items()
    ]
    expected.append(
        [
            f"`{CRITICAL_XIDS_KEY}`",
            f"`{list(defaults.critical_xids)}`",
            "list of XIDs the card's catalog holds",
            CRITICAL_XIDS_REASON,
        ]
    )
    documented = table_after(doc, THRESHOLDS_HEADING)
    found = [
        f"row {i + 1}: the doc has {d}, the code {e}"
        for i, (d, e) in enumerate(zip(documented, expected, strict=False))
        if d != e
    ]
    if len(documented) != len(expected):
        found.append(f"{len(documented)} rows in the doc, {len(expected)} keys in the code")
    return found
