"""The kind descriptor's diff rules (pure)."""

from __future__ import annotations

from providers.kind import UNKNOWN, KindDescriptor

K = KindDescriptor(
    name="Thing",
    identity=("spec.hostname",),
    replaces=("spec",),
    in_place=("spec.tags", "policy"),
    ignored=("spec.notes",),
)


def test_most_specific_rule_wins() -> None:
    assert K.diff({"spec": {"hostname": "a", "tags": ["x"]}}, {"spec": {"hostname": "a", "tags": ["y"]}}).updates == (
        "spec.tags",
    )
    assert K.diff({"spec": {"hostname": "a"}}, {"spec": {"hostname": "b"}}).replaces == ("spec.hostname",)
    assert K.diff({"spec": {"distro": "a"}}, {"spec": {"distro": "b"}}).replaces == ("spec.distro",)
    assert not K.diff({"spec": {"notes": "a"}}, {"spec": {"notes": "b"}}).changed


def test_unclassified_input_is_a_replace_and_unknown_counts_as_changed() -> None:
    assert K.diff({"other": 1}, {"other": 2}).replaces == ("other",)
    d = K.diff({"policy": {"a": 1}}, {"policy": UNKNOWN})
    assert d.updates == ("policy",) and not d.replaces


def test_numbers_and_sequences_compare_by_value() -> None:
    assert not K.diff({"policy": {"n": 4.0, "l": (1, 2)}}, {"policy": {"n": 4, "l": [1, 2]}}).changed
    assert not K.diff({"__provider": "a"}, {"__provider": "b"}).changed
