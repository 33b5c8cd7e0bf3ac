"""The record helper (`sdc_remediation.lambdas.models._record`): a dataclass written field by field and read back
by its annotations, as the models' `to_record` and `from_record` use it."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import pytest

from sdc_remediation.lambdas.models._record import read_record, record_of


class Colour(StrEnum):
    RED = "red"
    GREEN = "green"


@dataclass(frozen=True, slots=True)
class Leaf:
    name: str
    colour: Colour = Colour.RED


@dataclass(frozen=True, slots=True)
class Custom:
    """Writes and reads its own shape: the helper defers to its methods when nested."""

    value: int

    def to_record(self) -> dict[str, Any]:
        return {"v": self.value}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Custom:
        return cls(record["v"])


@dataclass(frozen=True, slots=True)
class Tree:
    name: str
    colour: Colour
    leaves: tuple[Leaf, ...] = ()
    by_name: dict[str, Leaf] = field(default_factory=dict)
    best: Leaf | None = None
    pairs: tuple[tuple[str, str], ...] = ()
    tags: list[str] = field(default_factory=list)
    note: str | None = None
    count: int = 0
    custom: Custom | None = None
    extra: dict[str, Any] | None = None


TREE = Tree(
    name="oak",
    colour=Colour.GREEN,
    leaves=(Leaf("a"), Leaf("b", Colour.GREEN)),
    by_name={"c": Leaf("c")},
    best=Leaf("d", Colour.GREEN),
    pairs=(("k", "v"),),
    tags=["x"],
    count=3,
    custom=Custom(7),
    extra={"n": [1, {"m": 2.5}]},
)

STORED = {
    "name": "oak",
    "colour": "green",
    "leaves": [{"name": "a", "colour": "red"}, {"name": "b", "colour": "green"}],
    "by_name": {"c": {"name": "c", "colour": "red"}},
    "best": {"name": "d", "colour": "green"},
    "pairs": [["k", "v"]],
    "tags": ["x"],
    "note": None,
    "count": 3,
    "custom": {"v": 7},
    "extra": {"n": [1, {"m": 2.5}]},
}


def test_a_record_is_every_field_in_plain_types_and_reads_back_equal():
    record = record_of(TREE)

    assert record == STORED
    assert list(record) == [f for f in STORED]
    assert type(record["colour"]) is str and type(record["leaves"]) is list
    assert read_record(Tree, record) == TREE


def test_enums_read_back_as_members_and_tuples_as_tuples():
    tree = read_record(Tree, STORED)

    assert tree.colour is Colour.GREEN
    assert tree.leaves[1].colour is Colour.GREEN
    assert tree.best is not None and tree.best.colour is Colour.GREEN
    assert tree.pairs == (("k", "v"),) and isinstance(tree.pairs[0], tuple)
    assert isinstance(tree.leaves, tuple) and isinstance(tree.tags, list)


def test_an_unknown_enum_value_is_refused():
    with pytest.raises(ValueError):
        read_record(Tree, {**STORED, "colour": "blue"})


def test_an_optional_nested_dataclass_reads_as_the_dataclass_or_none():
    assert read_record(Tree, STORED).best == Leaf("d", Colour.GREEN)
    assert read_record(Tree, {**STORED, "best": None}).best is None
    assert read_record(Tree, {**STORED, "custom": None}).custom is None


def test_a_nested_dataclass_with_its_own_record_methods_is_written_and_read_by_them():
    assert record_of(TREE)["custom"] == {"v": 7}
    assert read_record(Tree, STORED).custom == Custom(7)


def test_a_nested_value_already_read_is_kept():
    leaf = Leaf("e")

    assert read_record(Tree, {**STORED, "best": leaf}).best is leaf


def test_omit_none_leaves_out_only_the_keys_whose_value_is_none():
    record = record_of(TREE, omit_none=("note", "best"))

    assert "note" not in record
    assert record["best"] == {"name": "d", "colour": "green"}
    assert record_of(Tree("t", Colour.RED), omit_none=("best",)).get("best", "absent") == "absent"


def test_skip_leaves_out_keys_whatever_their_value():
    record = record_of(TREE, skip=("count", "note"))

    assert "count" not in record and "note" not in record
    assert read_record(Tree, record).count == 0


def test_options_naming_no_field_are_refused():
    with pytest.raises(ValueError, match="misspelt"):
        record_of(TREE, omit_none=("misspelt",))


def test_keys_that_name_no_field_are_ignored():
    assert read_record(Tree, {**STORED, "newer_writer": 1, "metrics": []}) == TREE


def test_missing_keys_and_none_for_a_field_that_cannot_be_none_take_the_default():
    tree = read_record(Tree, {"name": "oak", "colour": "red", "count": None, "tags": None})

    assert tree == Tree("oak", Colour.RED)
    assert tree.by_name == {} and tree.note is None


def test_none_stored_for_an_optional_field_stays_none():
    assert read_record(Tree, {**STORED, "note": None, "extra": None}).extra is None


def test_a_missing_field_without_default_is_refused():
    with pytest.raises(TypeError):
        read_record(Tree, {"name": "oak"})


def test_the_record_is_a_copy_the_object_does_not_share():
    tree = Tree("oak", Colour.RED, tags=["x"], extra={"n": [1]})

    record = record_of(tree)
    record["tags"].append("y")
    record["extra"]["n"].append(2)

    assert tree.tags == ["x"] and tree.extra == {"n": [1]}


def test_a_stored_isolated_node_reads_its_state_by_the_annotation():
    """What the enum change of `IsolatedNode.state` relies on: the helper reads by the field's
    annotation, so `str` stays text and an enum reads as its member."""
    from sdc_remediation.lambdas.models.isolation import IsolatedNode

    node = IsolatedNode.from_record({"state": "isolated", "node_name": "n", "later": 1})

    assert node.state == "isolated"
    assert node.to_record() == {
        "state": "isolated",
        "node_name": "n",
        "reason": None,
        "cause": None,
    }
