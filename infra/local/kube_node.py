"""The v1 Node as the API server keeps it, for the stand-in in `kube_api`: its fields, how
strategic merge patch merges its lists, the JSON it answers with, what an update may change,
how it is validated, and the selectors a node list takes.

- Fields: what the Go type has; a patch's other fields are dropped, with a warning
  (fieldValidation=Warn, the default), or refused (Strict: 422), or dropped silently (Ignore).
  `status` is not checked field by field: an update of the node never changes it.
- Strategic merge: `spec.taints` is `listType=atomic` with no patch strategy, so a strategic
  merge patch replaces the list whole, as a merge patch does; `spec.podCIDRs` and
  `metadata.finalizers` merge as sets, `metadata.ownerReferences` by `uid`, `status.conditions`
  and `status.addresses` by `type`. Labels and annotations are maps: merged key by key.
- The JSON answered: Go's `omitempty`, so a false `unschedulable`, an empty `taints` list, an
  empty label map or taint value are left out, not sent as false / [] / {} / "".
- An update (NodeStrategy.PrepareForUpdate, rest.BeforeUpdate): keeps the stored `status` and
  `creationTimestamp`, fills an emptied `uid`; the name must be the URL's (else 400); another
  `uid` is a 422 (immutable).
- Validation (ValidateNodeUpdate): label keys are qualified names and values label values,
  annotation keys qualified names; each taint has a qualified-name key, a label-value value, an
  effect of NoSchedule / PreferNoSchedule / NoExecute, and is unique by (key, effect). Bad types
  (`"unschedulable": "yes"`) fail decoding: 422 as well.
- Selectors: `labelSelector` (`k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`)
  and `fieldSelector` on `metadata.name` and `spec.unschedulable` (`=`, `==`, `!=`), the node
  fields a real server selects on; any other field: 400.

Sources: k8s.io/api/core/v1 types.go (patch strategies, list types), pkg/registry/core/node
(strategy, field selectors), pkg/apis/core/validation (validateNodeTaints),
k8s.io/apimachinery/pkg/util/validation (qualified names, label values).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from sdc_remediation.infra.local.kube_patch import (
    Fields,
    MergeList,
    StatusError,
    bad_request,
    json_kind,
)

NODE_STRATEGY = Fields(
    {
        "metadata": Fields(
            {"finalizers": MergeList(), "ownerReferences": MergeList("uid")},
        ),
        "spec": Fields({"podCIDRs": MergeList()}),
        "status": Fields({"conditions": MergeList("type"), "addresses": MergeList("type")}),
    }
)
"""How a strategic merge patch merges a Node's lists; any list not named is replaced whole."""

TAINT_EFFECTS = ("NoExecute", "NoSchedule", "PreferNoSchedule")

_TOP = {"kind", "apiVersion", "metadata", "spec", "status"}
_STRING, _BOOL, _INT = "string", "bool", "int64"
_STRINGS = "[]string"
_STRING_MAP = "map[string]string"
_METADATA: dict[str, str] = {
    "name": _STRING,
    "generateName": _STRING,
    "namespace": _STRING,
    "selfLink": _STRING,
    "uid": _STRING,
    "resourceVersion": _STRING,
    "generation": _INT,
    "creationTimestamp": _STRING,
    "deletionTimestamp": _STRING,
    "deletionGracePeriodSeconds": _INT,
    "labels": _STRING_MAP,
    "annotations": _STRING_MAP,
    "ownerReferences": "[]OwnerReference",
    "finalizers": _STRINGS,
    "managedFields": "[]ManagedFieldsEntry",
}
_SPEC: dict[str, str] = {
    "podCIDR": _STRING,
    "podCIDRs": _STRINGS,
    "providerID": _STRING,
    "unschedulable": _BOOL,
    "taints": "[]Taint",
    "configSource": "NodeConfigSource",
    "externalID": _STRING,
}
_TAINT: dict[str, str] = {"key": _STRING, "value": _STRING, "effect": _STRING, "timeAdded": _STRING}
_KEPT_WHEN_EMPTY = {("Taint", "key"), ("Taint", "effect")}
"""Fields without `omitempty` in the Go type (ObjectMeta, NodeSpec: all omitempty)."""

_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_NAME_RE = re.compile(f"^{_NAME}$")
_DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE_RE = re.compile(f"^({_NAME})?$")
_FIELD_SELECTABLE: dict[str, Callable[[dict[str, Any]], str]] = {
    "metadata.name": lambda node: str(node["metadata"].get("name", "")),
    "spec.unschedulable": lambda node: str(bool(node["spec"].get("unschedulable"))).lower(),
}


# -- decoding: types, unknown fields, omitempty ---------------------------------------------------


def decode(patched: Any, directive: str) -> tuple[dict[str, Any], list[str]]:
    """The patched node as the Go type holds it (unknown fields dropped, empties omitted) and
    the warnings; StatusError 422 on a type the field cannot hold, or on unknown fields when
    `directive` is Strict."""
    problem = _type_problem(patched)
    if problem:
        raise _invalid_patch(patched, problem)
    unknown: list[str] = []
    node = _known(patched, _TOP, "", unknown)
    metadata = _known(node.get("metadata") or {}, set(_METADATA), "metadata.", unknown)
    spec = _known(node.get("spec") or {}, set(_SPEC), "spec.", unknown)
    if spec.get("taints"):
        spec["taints"] = [
            _known(t, set(_TAINT), f"spec.taints[{i}].", unknown)
            for i, t in enumerate(spec["taints"])
        ]
    node["metadata"], node["spec"] = metadata, spec
    warnings = [f'unknown field "{path}"' for path in unknown]
    if warnings and directive == "Strict":
        detail = "strict decoding error: " + ", ".join(warnings)
        raise _invalid_patch(patched, detail)
    return canonical(node), ([] if directive == "Ignore" else warnings)


def canonical(node: dict[str, Any]) -> dict[str, Any]:
    """The node as the API server writes it out: omitempty fields left out when empty."""
    result = dict(node)
    result["metadata"] = _omit_empty(node.get("metadata") or {}, "ObjectMeta")
    spec = _omit_empty(node.get("spec") or {}, "NodeSpec")
    if spec.get("taints"):
        spec["taints"] = [_omit_empty(t, "Taint") for t in spec["taints"]]
    result["spec"] = spec
    return result


def _omit_empty(values: Mapping[str, Any], struct: str) -> dict[str, Any]:
    return {
        key: value
        for key, value in values.items()
        if (struct, key) in _KEPT_WHEN_EMPTY or value not in (None, False, "", [], {}, 0)
    }


def _known(values: Any, known: set[str], prefix: str, unknown: list[str]) -> dict[str, Any]:
    unknown.extend(prefix + key for key in values if key not in known)
    return {key: value for key, value in values.items() if key in known}


def _type_problem(node: Any) -> str | None:
    if not isinstance(node, dict):
        return f"json: cannot unmarshal {json_kind(node)} into Go value of type v1.Node"
    for name, struct, fields in (
        ("metadata", "ObjectMeta", _METADATA),
        ("spec", "NodeSpec", _SPEC),
    ):
        part = node.get(name)
        if part is None:
            continue
        if not isinstance(part, dict):
            return _cannot(part, f"Node.{name}", struct)
        for key, go_type in fields.items():
            problem = _value_problem(part.get(key), go_type, f"{struct}.{name}.{key}")
            if problem:
                return problem
        taints = (part.get("taints") or []) if name == "spec" else []
        for i, taint in enumerate(taints):
            if not isinstance(taint, dict):
                return _cannot(taint, f"NodeSpec.spec.taints[{i}]", "v1.Taint")
            for key, go_type in _TAINT.items():
                problem = _value_problem(taint.get(key), go_type, f"Taint.spec.taints.{key}")
                if problem:
                    return problem
    return None


def _value_problem(value: Any, go_type: str, where: str) -> str | None:
    if value is None:
        return None
    checks: dict[str, Callable[[Any], bool]] = {
        _STRING: lambda v: isinstance(v, str),
        _BOOL: lambda v: isinstance(v, bool),
        _INT: lambda v: isinstance(v, int) and not isinstance(v, bool),
        _STRINGS: lambda v: isinstance(v, list) and all(isinstance(s, str) for s in v),
        _STRING_MAP: lambda v: isinstance(v, dict) and all(isinstance(s, str) for s in v.values()),
    }
    fits = checks.get(go_type, lambda v: isinstance(v, list if go_type.startswith("[]") else dict))
    return None if fits(value) else _cannot(value, where, go_type)


def _cannot(value: Any, where: str, go_type: str) -> str:
    return (
        f"json: cannot unmarshal {json_kind(value)} into Go struct field {where} of type {go_type}"
    )


def _invalid_patch(patched: Any, detail: str) -> StatusError:
    shown = json.dumps(patched, separators=(",", ":"))
    message = f'Invalid value: "{shown}": {detail}'
    cause = {"reason": "FieldValueInvalid", "message": message, "field": "patch"}
    return StatusError(422, "Invalid", f' "" is invalid: patch: {message}', {"causes": [cause]})


# -- an update ------------------------------------------------------------------------------------


def check_name(patched: dict[str, Any], name: str) -> None:
    """A patch may not rename the node (400, as `checkName` answers)."""
    got = patched["metadata"].get("name", "")
    if got != name:
        raise bad_request(
            f"the name of the object ({got}) does not match the name on the URL ({name})"
        )


def prepare_update(patched: dict[str, Any], stored: dict[str, Any]) -> dict[str, Any]:
    """`patched` with what an update of a node never changes taken from `stored`."""
    node = dict(patched)
    metadata = dict(node["metadata"])
    kept = stored["metadata"]
    metadata["creationTimestamp"] = kept["creationTimestamp"]
    metadata.setdefault("uid", kept["uid"])
    if "generation" in kept:
        metadata["generation"] = kept["generation"]
    node["metadata"] = metadata
    node["kind"], node["apiVersion"] = stored["kind"], stored["apiVersion"]
    if "status" in stored:
        node["status"] = stored["status"]
    else:
        node.pop("status", None)
    return node


# -- validation -----------------------------------------------------------------------------------


def validate_update(node: dict[str, Any], stored: dict[str, Any]) -> None:
    """StatusError 422 (reason Invalid, one cause per field) when the updated node is invalid."""
    causes: list[dict[str, str]] = []
    name = node["metadata"]["name"]

    def invalid(kind: str, path: str, detail: str) -> None:
        causes.append({"reason": kind, "message": detail, "field": path})

    if node["metadata"].get("uid") != stored["metadata"]["uid"]:
        uid = node["metadata"].get("uid")
        invalid("FieldValueInvalid", "metadata.uid", f'Invalid value: "{uid}": field is immutable')
    for key, value in (node["metadata"].get("labels") or {}).items():
        for detail in _qualified_name_problems(key):
            invalid("FieldValueInvalid", "metadata.labels", f'Invalid value: "{key}": {detail}')
        if not _label_value_ok(value):
            invalid("FieldValueInvalid", "metadata.labels", f'Invalid value: "{value}": {_LABEL}')
    for key in node["metadata"].get("annotations") or {}:
        for detail in _qualified_name_problems(key.lower()):
            invalid(
                "FieldValueInvalid", "metadata.annotations", f'Invalid value: "{key}": {detail}'
            )
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(node["spec"].get("taints") or []):
        at = f"spec.taints[{i}]"
        key, value, effect = taint.get("key", ""), taint.get("value", ""), taint.get("effect", "")
        for detail in _qualified_name_problems(key):
            invalid("FieldValueInvalid", f"{at}.key", f'Invalid value: "{key}": {detail}')
        if not _label_value_ok(value):
            invalid("FieldValueInvalid", f"{at}.value", f'Invalid value: "{value}": {_LABEL}')
        if not effect:
            invalid("FieldValueRequired", f"{at}.effect", "Required value")
        elif effect not in TAINT_EFFECTS:
            supported = ", ".join(f'"{e}"' for e in TAINT_EFFECTS)
            invalid(
                "FieldValueNotSupported",
                f"{at}.effect",
                f'Unsupported value: "{effect}": supported values: {supported}',
            )
        if (key, effect) in seen:
            invalid(
                "FieldValueDuplicate",
                at,
                f"Duplicate value: {json.dumps(taint)}: taints must be unique by key and effect pair",
            )
        seen.add((key, effect))
    if causes:
        listed = [f"{c['field']}: {c['message']}" for c in causes]
        summary = listed[0] if len(listed) == 1 else "[" + ", ".join(listed) + "]"
        raise StatusError(
            422,
            "Invalid",
            f'Node "{name}" is invalid: {summary}',
            {"name": name, "kind": "Node", "causes": causes},
        )


_LABEL = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?"
    "[A-Za-z0-9])?')"
)


def _label_value_ok(value: str) -> bool:
    return len(value) <= 63 and bool(_LABEL_VALUE_RE.match(value))


def _qualified_name_problems(text: str) -> list[str]:
    prefix, slash, name = text.rpartition("/")
    if not slash:
        prefix, name = "", text
    problems = []
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN_RE.match(prefix)):
        problems.append("prefix part must be a lowercase RFC 1123 subdomain")
    if not name:
        problems.append("name part must be non-empty")
    elif len(name) > 63 or not _NAME_RE.match(name):
        problems.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
            "and end with an alphanumeric character, at most 63 characters"
        )
    return problems


# -- selectors ------------------------------------------------------------------------------------

Selector = Callable[[dict[str, Any]], bool]

_REQUIREMENT_RE = re.compile(
    r"^\s*(?P<neg>!)?\s*(?P<key>[^\s=!(),]+)\s*"
    r"(?:(?P<op>==|=|!=)\s*(?P<value>[^\s=!(),]*)|(?P<set>in|notin)\s*\((?P<values>[^()]*)\))?\s*$"
)


def label_selector(text: str) -> Selector:
    """A node matcher for a labelSelector; StatusError 400 when it does not parse."""
    requirements = [_label_requirement(part) for part in _split(text)]
    return lambda node: all(r(node["metadata"].get("labels") or {}) for r in requirements)


def field_selector(text: str) -> Selector:
    """A node matcher for a fieldSelector; StatusError 400 on a field nodes are not selected by."""
    checks: list[Selector] = []
    for part in _split(text):
        match = re.match(r"^\s*([^=!\s]+)\s*(==|=|!=)\s*(\S*)\s*$", part)
        if not match:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
        field, op, value = match.groups()
        if field not in _FIELD_SELECTABLE:
            raise bad_request(f"field label not supported: {field}")
        checks.append(_field_check(_FIELD_SELECTABLE[field], value, equal=op != "!="))
    return lambda node: all(check(node) for check in checks)


def _field_check(read: Callable[[dict[str, Any]], str], value: str, *, equal: bool) -> Selector:
    return lambda node: (read(node) == value) == equal


def _split(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current)
    return [p for p in parts if p.strip()]


def _label_requirement(part: str) -> Callable[[Mapping[str, str]], bool]:
    match = _REQUIREMENT_RE.match(part)
    if not match or (match["neg"] and (match["op"] or match["set"])):
        raise bad_request(f"unable to parse requirement: {part.strip()!r}")
    key = match["key"]
    if _qualified_name_problems(key):
        raise bad_request(f"unable to parse requirement: invalid label key {key!r}")
    if match["neg"]:
        return lambda labels: key not in labels
    if match["op"]:
        value = match["value"]
        if match["op"] == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    if match["set"]:
        values = {v.strip() for v in match["values"].split(",") if v.strip()}
        if match["set"] == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    return lambda labels: key in labels
