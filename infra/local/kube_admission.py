"""ValidatingAdmissionPolicies for the Kubernetes API stand-in (`kube_api`): the policies of a
manifest (admissionregistration.k8s.io/v1), applied to a node update as an API server applies
them, their CEL evaluated by cel-python.

- A policy takes effect only through a `ValidatingAdmissionPolicyBinding` naming it with `Deny`
  among its `validationActions`; its `matchConstraints.resourceRules` select the operation and
  resource (core group only), its `matchConditions` the request (all must hold).
- The CEL sees `object`, `oldObject`, `request` (`operation`, `name`, `userInfo` with
  `username` and `groups`) and `variables` (each variable evaluated in order, seeing those
  before it; a real server evaluates them lazily, which differs only when one fails).
- A validation that is false denies the request: 422 `Invalid` (or the validation's `reason`)
  with a real server's message, `<resource> "<name>" is forbidden: ValidatingAdmissionPolicy
  '<policy>' with binding '<binding>' denied request: <message>`. An expression that fails to
  evaluate denies with `failurePolicy: Fail` (the default) and is ignored with `Ignore`.
  `messageExpression`, `paramKind`, `auditAnnotations` and namespace selectors are not served.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import celpy

from sdc_remediation.infra.local.kube_patch import StatusError

POLICY_KIND = "ValidatingAdmissionPolicy"
BINDING_KIND = "ValidatingAdmissionPolicyBinding"
API_VERSION = "admissionregistration.k8s.io/v1"
CODES = {"Unauthorized": 401, "Forbidden": 403, "Invalid": 422, "RequestEntityTooLarge": 413}
"""The reasons a validation may give, and the HTTP status each answers with."""

_ENV = celpy.Environment()


@dataclass(frozen=True)
class Expression:
    text: str
    program: celpy.Runner

    @classmethod
    def compile(cls, text: str) -> Expression:
        return cls(text, _ENV.program(_ENV.compile(text)))

    def evaluate(self, activation: Mapping[str, Any]) -> Any:
        return self.program.evaluate(dict(activation))


@dataclass(frozen=True)
class Validation:
    expression: Expression
    message: str
    reason: str


@dataclass(frozen=True)
class Policy:
    name: str
    binding: str
    operations: tuple[str, ...]
    resources: tuple[str, ...]
    conditions: tuple[Expression, ...]
    variables: tuple[tuple[str, Expression], ...]
    validations: tuple[Validation, ...]
    fail_closed: bool


class Denied(Exception):
    """A policy denied the request (`reason` and `message` as the API server says them)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def policies(documents: Iterable[Any]) -> list[Policy]:
    """The bound, denying policies of a manifest's documents (other kinds are skipped)."""
    docs = [d for d in documents if isinstance(d, dict) and d.get("apiVersion") == API_VERSION]
    specs = {d["metadata"]["name"]: d["spec"] for d in docs if d.get("kind") == POLICY_KIND}
    found = []
    for binding in (d for d in docs if d.get("kind") == BINDING_KIND):
        spec = binding["spec"]
        if "Deny" not in (spec.get("validationActions") or []):
            continue
        policy = specs.get(spec["policyName"])
        if policy is None:
            continue
        found.append(_policy(spec["policyName"], binding["metadata"]["name"], policy))
    return found


def _policy(name: str, binding: str, spec: Mapping[str, Any]) -> Policy:
    if spec.get("paramKind"):
        raise ValueError(f"{POLICY_KIND} {name}: paramKind is not served by the stand-in")
    rules = (spec.get("matchConstraints") or {}).get("resourceRules") or []
    if any(rule.get("apiGroups") != [""] for rule in rules):
        raise ValueError(f"{POLICY_KIND} {name}: the stand-in serves the core API group only")
    return Policy(
        name=name,
        binding=binding,
        operations=tuple(op for rule in rules for op in rule.get("operations") or []),
        resources=tuple(res for rule in rules for res in rule.get("resources") or []),
        conditions=tuple(
            Expression.compile(c["expression"]) for c in spec.get("matchConditions") or []
        ),
        variables=tuple(
            (v["name"], Expression.compile(v["expression"])) for v in spec.get("variables") or []
        ),
        validations=tuple(
            Validation(
                Expression.compile(v["expression"]),
                " ".join(str(v.get("message") or "").split()),
                v.get("reason") or "Invalid",
            )
            for v in spec.get("validations") or []
        ),
        fail_closed=spec.get("failurePolicy", "Fail") == "Fail",
    )


def admit(
    found: Iterable[Policy],
    *,
    operation: str,
    resource: str,
    name: str,
    user: str,
    groups: Iterable[str],
    obj: dict[str, Any],
    old: dict[str, Any] | None,
) -> None:
    """Raise the API server's `StatusError` when a policy denies the request."""
    request = {
        "operation": operation,
        "name": name,
        "resource": {"group": "", "version": "v1", "resource": resource},
        "userInfo": {"username": user, "groups": list(groups)},
    }
    activation: dict[str, Any] = {
        "object": celpy.json_to_cel(obj),
        "oldObject": celpy.json_to_cel(old),
        "request": celpy.json_to_cel(request),
    }
    for policy in found:
        if operation not in policy.operations or resource not in policy.resources:
            continue
        try:
            _check(policy, activation)
        except Denied as denied:
            why = (
                f"{POLICY_KIND} '{policy.name}' with binding '{policy.binding}' denied request: "
                f"{denied.message}"
            )
            raise StatusError(
                CODES[denied.reason],
                denied.reason,
                f'{resource} "{name}" is forbidden: {why}',
                {"name": name, "kind": resource},
            ) from None


def _check(policy: Policy, activation: dict[str, Any]) -> None:
    """Raise `Denied` when the policy applies and a validation fails (or cannot be evaluated
    under `failurePolicy: Fail`)."""
    try:
        if not all(_true(c.evaluate(activation)) for c in policy.conditions):
            return
        variables: dict[str, Any] = {}
        for var_name, expression in policy.variables:
            scope = {**activation, "variables": _cel_map(variables)}
            variables[var_name] = expression.evaluate(scope)
        scope = {**activation, "variables": _cel_map(variables)}
    except celpy.CELEvalError as err:
        if policy.fail_closed:
            raise Denied("Invalid", f"expression could not be evaluated: {err.args[0]}") from None
        return
    for validation in policy.validations:
        try:
            passed = _true(validation.expression.evaluate(scope))
        except celpy.CELEvalError as err:
            if not policy.fail_closed:
                continue
            text = validation.expression.text
            raise Denied(
                "Invalid", f"expression '{text}' resulted in error: {err.args[0]}"
            ) from None
        if not passed:
            message = validation.message or f"failed expression: {validation.expression.text}"
            raise Denied(validation.reason, message)


def _true(value: Any) -> bool:
    return isinstance(value, celpy.celtypes.BoolType) and bool(value)


def _cel_map(values: Mapping[str, Any]) -> Any:
    return celpy.celtypes.MapType({celpy.celtypes.StringType(k): v for k, v in values.items()})
