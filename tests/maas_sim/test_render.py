"""The simulator's bulk machine body is json.dumps() of the renderings, byte for byte, whatever changed between
two reads: a machine's JSON is reused while its rendering is unchanged, and a deployed machine's hardware-sync
times (which move at every report) are spliced in at each read, never served stale."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simulators.maas.render as render

MARKERS = [render._MARK.format(k) for k in render._VOLATILE]
text = st.one_of(st.text(max_size=6), st.sampled_from(MARKERS), st.sampled_from([f"a{m}b" for m in MARKERS]))
value = st.one_of(st.none(), st.integers(-3, 3), text)
times = st.one_of(st.none(), st.sampled_from(["2026-12-07T05:00:00.000000", "2026-12-07T05:00:03.600000"]))


@st.composite
def rendering(draw: st.DrawFn) -> dict[str, Any]:
    """A machine's rendering as machine_json shapes it: free-form dicts, the sync times between other fields
    (sometimes missing or out of order, as a hostile or older rendering could be), any value a marker."""
    data: dict[str, Any] = {"system_id": draw(st.sampled_from(["abc", "def"])), "hostname": draw(text)}
    data["owner_data"] = draw(st.dictionaries(text, text, max_size=3))
    data["hardware_info"] = draw(st.dictionaries(st.sampled_from(["cpu", "mem"]), value, max_size=2))
    volatile = [k for k in render._VOLATILE if draw(st.booleans()) or draw(st.booleans())]
    if draw(st.booleans()):
        volatile.reverse()
    for k in volatile:
        data[k] = draw(times)
        data[f"after_{k}"] = draw(value)
    data["status"] = draw(st.integers(0, 6))
    return data


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(rendering(), min_size=1, max_size=3), min_size=1, max_size=6))
def test_the_body_is_json_dumps_of_every_read_s_renderings(reads: list[list[dict[str, Any]]]) -> None:
    machines = [SimpleNamespace(rendered=None) for _ in range(3)]
    for renderings in reads:
        pairs = list(zip(machines, renderings, strict=False))
        body = render.machine_list_body(pairs)  # type: ignore[arg-type]
        assert body == json.dumps([d for _m, d in pairs]).encode()


def test_a_hardware_sync_alone_reuses_the_rest_of_the_machine_s_json(monkeypatch: pytest.MonkeyPatch) -> None:
    m = SimpleNamespace(rendered=None)
    data: dict[str, Any] = {"system_id": "abc", "owner_data": {"k": "v"}, "hardware_info": {},
                            "last_sync": "2026-12-07T05:00:00.000000", "next_sync": "2026-12-07T05:15:00.000000",
                            "resource_uri": "/MAAS/api/2.0/machines/abc/"}
    render.machine_list_body([(m, data)])  # type: ignore[list-item]
    encodes: list[dict[str, Any]] = []
    monkeypatch.setattr(render, "_encoded_parts", lambda d: encodes.append(d))  # any new encoding is seen
    synced = {**data, "last_sync": "2026-12-07T05:15:00.000000", "next_sync": "2026-12-07T05:30:00.000000"}
    assert render.machine_list_body([(m, synced)]) == json.dumps([synced]).encode()  # type: ignore[list-item]
    assert encodes == []
    renamed = {**synced, "owner_data": {"k": "w"}}
    render.machine_list_body([(m, renamed)])  # type: ignore[list-item]
    assert encodes == [renamed]
