"""The property walks every check and diff makes (`plain`, `has_unknown`, the diff's `_normal`) take the SDK's
exact types first: they must answer as the plain isinstance walks they replaced, for any value."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from providers.common import has_unknown, plain
from providers.kind import UNKNOWN, _normal, is_unknown


class Unknown:  # the SDK's own sentinel type is matched by name
    pass


class Colour(StrEnum):
    RED = "red"


def reference_has_unknown(value: Any) -> bool:
    if is_unknown(value):
        return True
    if isinstance(value, Mapping):
        return any(reference_has_unknown(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(reference_has_unknown(v) for v in value)
    return False


def reference_plain(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {k: reference_plain(v) for k, v in value.items() if not str(k).startswith("__")}
    if isinstance(value, list | tuple):
        return [reference_plain(v) for v in value]
    return value


def reference_normal(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list | tuple):
        return [reference_normal(v) for v in value]
    if isinstance(value, Mapping):
        return {k: reference_normal(v) for k, v in value.items()}
    return value


leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=4),
                   st.just(UNKNOWN), st.just(Colour.RED), st.builds(Unknown))
keys = st.one_of(st.text(max_size=4), st.sampled_from(["__provider", "__x", "a"]), st.integers(0, 3))
values = st.recursive(leaves, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.lists(inner, max_size=4).map(tuple),
    st.dictionaries(keys, inner, max_size=4), st.dictionaries(keys, inner, max_size=4).map(MappingProxyType)),
    max_leaves=30)


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down (4 and 4.0 are equal, not the same)."""
    if type(a) is not type(b):
        return isinstance(a, Unknown) and isinstance(b, Unknown)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a is b or a == b


@settings(max_examples=400, deadline=None)
@given(values)
def test_the_walks_answer_as_the_isinstance_walks_did(value: Any) -> None:
    assert has_unknown(value) == reference_has_unknown(value)
    assert same(plain(value), reference_plain(value))
    assert same(_normal(value), reference_normal(value))
