"""Human approval keeps one module per job (request, decide, storm reset, proceed, page), each
named in the package's docstring, and no module of the logic calls two different things
"deliver"."""

from __future__ import annotations

import ast
import importlib

from tests.conftest import REPO

APPROVAL = REPO / "lambdas" / "logic" / "approval"
JOBS = ("request", "decide", "reset", "proceed", "page")


def test_each_job_of_the_approval_is_a_module_of_its_package():
    modules = {p.stem for p in APPROVAL.glob("*.py")} - {"__init__"}

    assert set(JOBS) <= modules
    assert modules - set(JOBS) == {"replies"}
    doc = importlib.import_module("sdc_remediation.lambdas.logic.approval").__doc__ or ""
    for module in modules:
        assert f"`{module}`" in doc, module


def test_no_name_in_the_logic_is_deliver():
    names = set()
    for path in (REPO / "lambdas" / "logic").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                names.add(node.name.lstrip("_"))
    assert {"deliver", "Delivery"} & names == set()
