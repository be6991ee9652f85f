"""Keys issued by the simulator; a bad key is refused with 401 and MAAS's body on the first
authenticated call (connect itself only reads the anonymous describe document)."""

from __future__ import annotations

import httpx
import pytest
from maas.client.bones import CallError

from simulators.maas import MaasSimulator

from .conftest import connect


def test_bad_token_secret_fails_on_first_call_not_at_connect(maas_sim) -> None:
    consumer, token, _ = maas_sim.api_key.split(":")
    client = connect(maas_sim, apikey=f"{consumer}:{token}:wrongsecretwrongsecret")
    with pytest.raises(CallError) as info:
        client.machines.list()
    assert info.value.status == 401
    assert info.value.content == b"Authorization Error: 'Invalid signature.'"
    assert b"wrongsecret" not in info.value.content and info.value.response.headers["WWW-Authenticate"]


def test_unknown_consumer_and_token(maas_sim) -> None:
    consumer, token, secret = maas_sim.api_key.split(":")
    with pytest.raises(CallError) as info:
        connect(maas_sim, apikey=f"nosuchconsumer:{token}:{secret}").machines.list()
    assert (info.value.status, info.value.content) == (401, b"Authorization Error: Invalid API key.")
    with pytest.raises(CallError) as info:
        connect(maas_sim, apikey=f"{consumer}:badtoken:{secret}").machines.list()
    assert (info.value.status, info.value.content) == (
        401, b"Authorization Error: 'Invalid access token: badtoken'")


def test_anonymous_access_only_where_maas_allows(maas_sim) -> None:
    anon = connect(maas_sim, apikey="")
    assert anon.version.get().version  # VersionHandler is anonymous
    api = f"{maas_sim.url}api/2.0"
    assert httpx.get(f"{api}/describe/").status_code == 200
    listing = httpx.get(f"{api}/machines/")
    assert listing.status_code == 400  # AnonMachinesHandler has no read: MAAS's signature error
    assert httpx.get(f"{api}/machines/", params={"op": "is_registered", "mac_address": "52:54:00:00:00:01"}
                     ).json() is True
    for path in ("/tags/", "/subnets/", "/fabrics/", "/zones/"):
        resp = httpx.get(api + path)
        assert (resp.status_code, resp.text) == (401, "Forbidden"), path
    accept = httpx.post(f"{api}/machines/", params={"op": "accept"})
    assert accept.status_code == 401
    machine = maas_sim.admin.machines()[0]["system_id"]
    assert httpx.get(f"{api}/machines/{machine}/").status_code == 401
    assert httpx.get(f"{api}/nosuch/").status_code == 404


def test_anonymous_enlistment_is_new_and_limited(maas_sim) -> None:
    resp = httpx.post(f"{maas_sim.url}api/2.0/machines/",
                      data={"architecture": "amd64/generic", "mac_addresses": "aa:00:00:00:05:01"})
    assert resp.status_code == 200
    data = resp.json()
    assert data["status_name"] == "New" and "power_parameters" not in data and "interface_set" not in data


def test_fixed_api_key_and_repr_hide_secret() -> None:
    key = "aaaaaaaaaaaaaaaaaa:bbbbbbbbbbbbbbbbbb:cccccccccccccccccccccccccccccccc"
    with MaasSimulator(api_key=key, time_scale=1e-4) as sim:
        assert sim.api_key == key
        assert connect(sim).machines.list()
        assert "cccc" not in repr(sim.core.api_key) and "cccc" not in repr(sim)


def test_a_key_rotated_through_the_account_api_as_an_operator_does(maas_sim) -> None:
    """MAAS's AccountHandler through python-libmaas: a new key works at once, the old one is refused as soon as
    it is deleted, and deleting it again is MAAS's 404 (the convergence property rotates keys this way)."""
    old = connect(maas_sim, apikey=maas_sim.api_key)
    new_creds = old.account.create_credentials()
    new = connect(maas_sim, apikey=str(new_creds))
    assert new.users.whoami().username == "admin"
    old_key = maas_sim.api_key
    new.account.delete_credentials(type(new_creds).parse(old_key))
    with pytest.raises(CallError) as info:
        connect(maas_sim, apikey=old_key).machines.list()
    assert (info.value.status, info.value.content) == (401, b"Authorization Error: Invalid API key.")
    assert new.machines.list() is not None
    with pytest.raises(CallError) as info:  # deleting it again: MAAS's 404
        new.account.delete_credentials(type(new_creds).parse(old_key))
    assert info.value.status == 404
