"""The three patch formats a Kubernetes API server applies to an object, as it applies them, and
the `Status` errors it answers with (for the stand-in in `kube_api`).

- JSON patch (RFC 6902, `application/json-patch+json`): a list of add / remove / replace / move /
  copy / test operations on JSON pointers (`~1` is `/`, `~0` is `~`), all or nothing. The API
  server applies it with evanphx/json-patch v4: a body that is no list of operations is a 400
  BadRequest; an operation that does not apply (a failed `test`, removing or replacing a
  missing path) is a 422 whose message is the generic "the server rejected our request due to
  an error in our request" (`NewGenericServerResponse` keeps no detail for 422), reason Invalid.
  As in v4, `test` of a missing path against `null` passes.
- JSON merge patch (RFC 7386, `application/merge-patch+json`): objects merge key by key, `null`
  deletes, anything else (lists included) replaces. A body that is no JSON object: 400.
- Strategic merge patch (`application/strategic-merge-patch+json`): a merge patch that knows,
  field by field, how the Go type merges lists (`patchStrategy` / `patchMergeKey`): a list with
  strategy merge is merged (by its merge key, or as a set of scalars), every other list is
  replaced whole; maps merge key by key, `null` deletes. Directives: `$patch: replace` /
  `$patch: delete` (in a map or as an element of a merging list), `$retainKeys`,
  `$deleteFromPrimitiveList/<field>`. `$setElementOrder/<field>` (ordering of merged lists) is
  not implemented: the stand-in answers 400 saying so rather than order differently.

Sources: k8s.io/apiserver/pkg/endpoints/handlers/patch.go, k8s.io/apimachinery/pkg/api/errors,
k8s.io/apimachinery/pkg/util/strategicpatch.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH)
"""What the API server accepts on PATCH of a built-in resource, in the order it names them."""

REJECTED_422 = "the server rejected our request due to an error in our request"


@dataclass
class StatusError(Exception):
    """An error the API server answers with a `Status` object."""

    code: int
    reason: str
    message: str
    details: dict[str, Any] | None = None

    def __str__(self) -> str:
        return self.message

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body


def bad_request(message: str) -> StatusError:
    return StatusError(400, "BadRequest", message)


def json_patch_failed() -> StatusError:
    return StatusError(422, "Invalid", REJECTED_422, {})


# -- RFC 6902 -------------------------------------------------------------------------------------


def apply_json_patch(document: Any, operations: Any) -> Any:
    """`document` with `operations` applied; StatusError 400 when they are no JSON patch,
    422 when one does not apply. `document` is not changed."""
    if not isinstance(operations, list) or not all(isinstance(o, dict) for o in operations):
        raise bad_request(
            f"json: cannot unmarshal {json_kind(operations)} into Go value of type jsonpatch.Patch"
        )
    result = copy.deepcopy(document)
    for operation in operations:
        result = _apply_operation(result, operation)
    return result


def _apply_operation(document: Any, operation: Mapping[str, Any]) -> Any:
    op = operation.get("op")
    path = operation.get("path")
    if not isinstance(path, str):
        raise json_patch_failed()
    if op == "add":
        return _add(document, path, copy.deepcopy(operation.get("value")))
    if op == "remove":
        return _remove(document, path)[0]
    if op == "replace":
        _get(document, path)  # must exist
        document = _remove(document, path)[0]
        return _add(document, path, copy.deepcopy(operation.get("value")))
    if op in ("move", "copy"):
        source = operation.get("from")
        if not isinstance(source, str):
            raise json_patch_failed()
        value = _get(document, source)
        if op == "move":
            document = _remove(document, source)[0]
        return _add(document, path, copy.deepcopy(value))
    if op == "test":
        if not _same(_found(document, path), operation.get("value")):
            raise json_patch_failed()
        return document
    raise json_patch_failed()


def _tokens(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise json_patch_failed()
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _index(container: list[Any], token: str, *, appending: bool) -> int:
    if appending and token == "-":
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise json_patch_failed()
    index = int(token)
    if index > len(container) or (index == len(container) and not appending):
        raise json_patch_failed()
    return index


def _parent(document: Any, tokens: list[str]) -> Any:
    node = document
    for token in tokens[:-1]:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(node, token, appending=False)]
        else:
            raise json_patch_failed()
    return node


def _get(document: Any, path: str) -> Any:
    tokens = _tokens(path)
    if not tokens:
        return document
    parent = _parent(document, tokens)
    last = tokens[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, appending=False)]
    raise json_patch_failed()


def _found(document: Any, path: str) -> Any:
    """What `test` compares: the value at `path`, None when its last step is missing (the
    parent must exist)."""
    tokens = _tokens(path)
    if not tokens:
        return document
    parent = _parent(document, tokens)
    if isinstance(parent, dict):
        return parent.get(tokens[-1])
    if isinstance(parent, list):
        return parent[_index(parent, tokens[-1], appending=False)]
    raise json_patch_failed()


def _same(left: Any, right: Any) -> bool:
    """JSON equality: `true` is not `1`."""
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_same(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(
            _same(a, b) for a, b in zip(left, right, strict=True)
        )
    return bool(left == right)


def _add(document: Any, path: str, value: Any) -> Any:
    tokens = _tokens(path)
    if not tokens:
        return value
    parent = _parent(document, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, appending=True), value)
    else:
        raise json_patch_failed()
    return document


def _remove(document: Any, path: str) -> tuple[Any, Any]:
    tokens = _tokens(path)
    if not tokens:
        raise json_patch_failed()
    parent = _parent(document, tokens)
    last = tokens[-1]
    if isinstance(parent, dict) and last in parent:
        return document, parent.pop(last)
    if isinstance(parent, list):
        return document, parent.pop(_index(parent, last, appending=False))
    raise json_patch_failed()


# -- RFC 7386 -------------------------------------------------------------------------------------


def apply_merge_patch(document: Any, patch: Any) -> Any:
    """`document` with the JSON merge patch applied; StatusError 400 when `patch` is no object."""
    if not isinstance(patch, dict):
        raise bad_request("Invalid JSON Patch")
    return _merge(document, patch)


def _merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge(result.get(key), value)
    return result


# -- strategic merge patch ------------------------------------------------------------------------


@dataclass(frozen=True)
class MergeList:
    """A list field with `patchStrategy:"merge"`: by `key` (a list of maps) or, without one, a
    set of scalars."""

    key: str | None = None


@dataclass(frozen=True)
class Fields:
    """How a map-shaped field's own fields merge: a nested `Fields`, or a `MergeList`. Fields not
    named here merge as maps when both sides are maps, else the patch replaces them."""

    children: Mapping[str, Fields | MergeList] = field(default_factory=dict)

    def child(self, name: str) -> Fields | MergeList:
        return self.children.get(name, _ANY)


_ANY = Fields()
DIRECTIVE = "$patch"
RETAIN_KEYS = "$retainKeys"
DELETE_FROM = "$deleteFromPrimitiveList/"
SET_ORDER = "$setElementOrder/"


def apply_strategic_merge_patch(document: Any, patch: Any, schema: Fields) -> Any:
    """`document` with the strategic merge patch applied against the type's `schema`;
    StatusError 400 when `patch` is no object or uses a directive the stand-in lacks."""
    if not isinstance(patch, dict):
        raise bad_request(
            f"json: cannot unmarshal {json_kind(patch)} into Go value of type "
            "map[string]interface {}"
        )
    return _merge_map(copy.deepcopy(document), copy.deepcopy(patch), schema)


def _merge_map(original: dict[str, Any], patch: dict[str, Any], schema: Fields) -> dict[str, Any]:
    directive = patch.pop(DIRECTIVE, None)
    if directive == "replace":
        return _without_directives(patch)
    if directive == "delete":
        return {}
    if directive is not None:
        raise bad_request(f"unknown patch type: {directive} in map: {patch}")
    retain = patch.pop(RETAIN_KEYS, None)
    if retain is not None:
        if not isinstance(retain, list):
            raise bad_request("invalid patch format for $retainKeys")
        original = {k: v for k, v in original.items() if k in retain}
    ordering = next((k for k in patch if k.startswith(SET_ORDER)), None)
    if ordering:
        raise bad_request(f"the stand-in does not implement {ordering} (order of merged lists)")
    for key in [k for k in patch if k.startswith(DELETE_FROM)]:
        doomed = patch.pop(key)
        name = key[len(DELETE_FROM) :]
        if not isinstance(doomed, list):
            raise bad_request("invalid patch format for $deleteFromPrimitiveList")
        if isinstance(original.get(name), list):
            original[name] = [v for v in original[name] if v not in doomed]
    for key, value in patch.items():
        if value is None:
            original.pop(key, None)
            continue
        if key not in original:
            original[key] = _without_directives(_without_nulls(value))
            continue
        rule = schema.child(key)
        current = original[key]
        if isinstance(value, dict) and isinstance(current, dict):
            original[key] = _merge_map(current, value, rule if isinstance(rule, Fields) else _ANY)
        elif isinstance(value, list) and isinstance(current, list) and isinstance(rule, MergeList):
            original[key] = _merge_list(current, value, rule)
        else:
            original[key] = _without_directives(_without_nulls(value))
    return original


def _merge_list(original: list[Any], patch: list[Any], rule: MergeList) -> list[Any]:
    if rule.key is None:
        merged = list(original)
        for value in patch:
            if value not in merged:
                merged.append(value)
        return merged
    if any(isinstance(e, dict) and e.get(DIRECTIVE) == "replace" for e in patch):
        return [_without_directives(e) for e in patch if not _is_directive(e)]
    merged = list(original)
    for element in patch:
        if not isinstance(element, dict) or rule.key not in element:
            raise bad_request(f"map: {element} does not contain declared merge key: {rule.key}")
        at = next((i for i, e in enumerate(merged) if _keyed(e, rule.key, element)), None)
        if element.get(DIRECTIVE) == "delete":
            if at is not None:
                merged.pop(at)
        elif at is None:
            merged.append(_without_directives(_without_nulls(element)))
        else:
            merged[at] = _merge_map(merged[at], dict(element), _ANY)
    return merged


def _keyed(candidate: Any, key: str, element: dict[str, Any]) -> bool:
    return isinstance(candidate, dict) and candidate.get(key) == element[key]


def _is_directive(element: Any) -> bool:
    return isinstance(element, dict) and set(element) == {DIRECTIVE}


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _without_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _without_directives(v)
            for k, v in value.items()
            if not (k in (DIRECTIVE, RETAIN_KEYS) or k.startswith(("$deleteFrom", "$setElement")))
        }
    if isinstance(value, list):
        return [_without_directives(v) for v in value if not _is_directive(v)]
    return value


def json_kind(value: Any) -> str:
    """The JSON kind of a decoded value, as Go's decoder names it in its errors."""
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    if value is None:
        return "null"
    return "number"


def decode_body(body: bytes) -> Any:
    """The request body as JSON; StatusError 400 when it is none."""
    try:
        return json.loads(body or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise bad_request(f"error decoding patch: {err}") from err
