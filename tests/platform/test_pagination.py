"""Lists come in pages: `limit` and an opaque `cursor`; the client follows cursors to the end."""

from __future__ import annotations

import pytest

from clients.platform import PlatformClient
from clients.platform import models as m
from tests.fixtures.platform_sim import RunningSim

from .conftest import HTTP


def make_sites(admin: PlatformClient, n: int) -> list[str]:
    return [
        admin.create_site(
            m.MaasSiteCreate(
                name=f"site-{i:03d}", maas_url="http://maas/MAAS", credential_ref=m.VaultCredentialRef(path=f"maas/{i}")
            )
        ).site_id
        for i in range(n)
    ]


def test_pages_cover_the_list_exactly_once(platform_sim: RunningSim, admin: PlatformClient) -> None:
    ids = make_sites(admin, 5)
    auth = {"Authorization": f"Bearer {platform_sim.creds.platform_admin}"}
    seen, cursor, pages = [], None, 0
    while True:
        params = {"limit": "2", **({"cursor": cursor} if cursor else {})}
        body = HTTP.get(f"{platform_sim.url}/api/v1/admin/maas-sites", headers=auth, params=params).json()
        seen += [s["site_id"] for s in body["items"]]
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert (seen, pages) == (ids, 3)


def test_the_client_follows_cursors_past_the_default_page(admin: PlatformClient) -> None:
    ids = make_sites(admin, 105)
    assert [s.site_id for s in admin.list_sites()] == ids


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"limit": "0"}, "invalid_query_parameter"),
        ({"limit": "501"}, "invalid_query_parameter"),
        ({"hostnmae": "gpu-01"}, "invalid_query_parameter"),  # a misspelt filter never lists everything
        ({"cursor": "bm9wZQ"}, "invalid_cursor"),  # well-formed, but not one the API issued
        ({"cursor": "LTU"}, "invalid_cursor"),
    ],
)
def test_bad_paging_and_unknown_filters_are_refused(
    platform_sim: RunningSim, params: dict[str, str], code: str
) -> None:
    resp = HTTP.get(
        f"{platform_sim.url}/api/v1/admin/nodes",
        params=params,
        headers={"Authorization": f"Bearer {platform_sim.creds.platform_admin}"},
    )
    assert resp.status_code == 422 and resp.json()["code"] == code
