"""The pure RoCE allocation: examples, errors, and hypothesis properties (uniqueness, stability)."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from providers.sites.failures import RoceFail
from providers.sites.roce import AllocationError, Nic, Pool, _parsed, allocate

RAILS = 8
IFACES = [f"ens{r + 1}f0np0" for r in range(RAILS)]


def pools(size: int = 10, rails: int = RAILS) -> list[Pool]:
    return [Pool(site="s", rail=r, subnet=ipaddress.IPv4Network(f"10.224.{r}.0/24"),
                 start=ipaddress.IPv4Address(f"10.224.{r}.10"),
                 end=ipaddress.IPv4Address(f"10.224.{r}.{10 + size - 1}")) for r in range(rails)]


def nics(*hosts: str) -> list[Nic]:
    return [Nic(hostname=h, interface=IFACES[r], rail=r) for h in hosts for r in range(RAILS)]


def addresses(table: dict) -> dict:
    return {k: e.address for k, e in table.items()}


def test_eight_rails_each_from_its_own_pool_in_hostname_order() -> None:
    t = allocate(pools(), nics("gpu-2", "gpu-1"), {})
    assert t[("gpu-1", "ens1f0np0")].address == "10.224.0.10"
    assert t[("gpu-2", "ens1f0np0")].address == "10.224.0.11"
    assert t[("gpu-1", "ens8f0np0")].address == "10.224.7.10" and t[("gpu-1", "ens8f0np0")].mtu == 9000
    assert {e.subnet for (h, _), e in t.items() if h == "gpu-1"} == {f"10.224.{r}.0/24" for r in range(RAILS)}


def test_adding_a_machine_that_sorts_first_renumbers_nobody() -> None:
    first = addresses(allocate(pools(), nics("gpu-5", "gpu-7"), {}))
    second = addresses(allocate(pools(), nics("gpu-1", "gpu-5", "gpu-7"), first))
    assert all(second[k] == v for k, v in first.items())
    assert second[("gpu-1", "ens1f0np0")] == "10.224.0.12"


def test_held_addresses_are_skipped() -> None:
    t = allocate(pools(), nics("gpu-1"), {}, held={"10.224.0.10": "other/ens1f0np0 in MAAS"})
    assert t[("gpu-1", "ens1f0np0")].address == "10.224.0.11"


def test_a_held_text_that_is_no_address_holds_nothing() -> None:
    held = {"not-an-address": "x/y", "10.224.0.010": "x/z", "10.224.0.10": "other/ens1f0np0 in MAAS"}
    t = allocate(pools(), nics("gpu-1"), {}, held=held)
    assert t[("gpu-1", "ens1f0np0")].address == "10.224.0.11"
    assert t[("gpu-1", "ens2f0np0")].address == "10.224.1.10"


def test_exhausted_pool_names_pool_and_hostname() -> None:
    with pytest.raises(AllocationError) as err:
        allocate(pools(size=2), nics("gpu-1", "gpu-2", "gpu-3"), {})
    assert err.value.code is RoceFail.POOL_EXHAUSTED and err.value.hostname == "gpu-3"
    assert str(err.value).startswith("ROC006 pool s/rail0 (10.224.0.0/24, 10.224.0.10-10.224.0.11): host gpu-3: ")
    assert str(err.value).endswith("; fix: widen the pool's range")


def test_collisions_in_state_or_with_maas_are_errors() -> None:
    existing = {("gpu-1", "ens1f0np0"): "10.224.0.10", ("gpu-2", "ens1f0np0"): "10.224.0.10"}
    with pytest.raises(AllocationError) as err:
        allocate(pools(), nics("gpu-1", "gpu-2"), existing)
    assert err.value.code is RoceFail.ADDRESS_TWICE and "rail0" in str(err.value) and "gpu-2" in str(err.value)
    with pytest.raises(AllocationError) as err:
        allocate(pools(), nics("gpu-1"), {("gpu-1", "ens1f0np0"): "10.224.0.10"}, held={"10.224.0.10": "x/y"})
    assert err.value.code is RoceFail.ADDRESS_HELD and "x/y" in str(err.value)


def test_missing_rail_and_shrunk_range() -> None:
    with pytest.raises(AllocationError) as err:
        allocate(pools(rails=7), nics("gpu-1"), {})
    assert err.value.code is RoceFail.RAIL_WITHOUT_POOL
    with pytest.raises(AllocationError) as err:
        allocate(pools(size=2), nics("gpu-1"), {("gpu-1", "ens1f0np0"): "10.224.0.50"})
    assert err.value.code is RoceFail.OUTSIDE_RANGE


def test_a_recorded_text_that_is_no_address_is_roc010_naming_interface_and_text() -> None:
    """State edited by hand: the check refuses with a code and what is recorded (it raised a bare ValueError)."""
    for text in ("10.224.0.1O", "10.224.0.010", "", "10.224.0.10 "):
        with pytest.raises(AllocationError) as err:
            allocate(pools(), nics("gpu-1"), {("gpu-1", "ens3f0np0"): text})
        assert err.value.code is RoceFail.RECORD_NOT_ADDRESS and err.value.hostname == "gpu-1"
        assert str(err.value).startswith("ROC010 pool s/rail2 ")
        assert f"ens3f0np0 is recorded with {text!r}" in str(err.value)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.ip_addresses(v=4).map(str), st.text(alphabet="0123456789. x", max_size=17),
                 st.lists(st.integers(0, 999).map(str), min_size=3, max_size=5).map(".".join)))
def test_the_address_parser_accepts_exactly_what_ipaddress_does(text: str) -> None:
    try:
        expected: int | None = int(ipaddress.IPv4Address(text))
    except ValueError:
        expected = None
    assert _parsed(text) == expected


# --- properties ------------------------------------------------------------------------------------
HOSTS = [f"gpu-{i:02d}" for i in range(12)]
# A sequence of operations: add a host or remove a host.
ops = st.lists(st.tuples(st.booleans(), st.sampled_from(HOSTS)), min_size=1, max_size=25)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_any_add_remove_sequence_keeps_existing_and_never_shares(steps: list[tuple[bool, str]]) -> None:
    present: list[str] = []
    state: dict = {}
    for add, host in steps:
        if add and host not in present:
            present.append(host)
        elif not add and host in present:
            present.remove(host)
        table = addresses(allocate(pools(size=40), nics(*present), state))
        # existing assignments of hosts still present are unchanged
        assert all(table[k] == v for k, v in state.items() if k[0] in present)
        # no two interfaces share an address
        assert len(set(table.values())) == len(table)
        # every address is inside its rail's range
        for (_, iface), a in table.items():
            r = IFACES.index(iface)
            assert ipaddress.IPv4Address(f"10.224.{r}.10") <= ipaddress.IPv4Address(a) <= ipaddress.IPv4Address(
                f"10.224.{r}.49")
        state = table


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(HOSTS), unique=True, min_size=1, max_size=12),
       st.sets(st.integers(min_value=10, max_value=49), max_size=20))
def test_deterministic_and_never_uses_held(hosts: list[str], held_octets: set[int]) -> None:
    held = {f"10.224.{r}.{o}": "someone" for r in range(RAILS) for o in held_octets}
    try:
        a = addresses(allocate(pools(size=40), nics(*hosts), {}, held))
    except AllocationError as e:
        assert e.code is RoceFail.POOL_EXHAUSTED  # only possible when held + hosts exceed the range
        assert len(hosts) + len(held_octets) > 40
        return
    b = addresses(allocate(pools(size=40), nics(*reversed(hosts)), {}, held))
    assert a == b  # same inputs (in any order): same table
    assert not set(a.values()) & set(held)
