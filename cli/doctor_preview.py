"""doctor's `preview identity` row: the merge-request previews' AppRole (PREVIEW_VAULT_ROLE_ID,
PREVIEW_VAULT_SECRET_ID: the CI/CD variables scoped to `preview/<stack>`) is read-only.

It must log in, decrypt with the stack's transit key (the state's secrets), and nothing more: no transit
encrypt, no read of any Vault entry the environment's checklist names. Vault answers that itself
(`sys/capabilities-self` for each path): nothing is decrypted, written or read to find out."""

from __future__ import annotations

import os
from collections.abc import Callable

from clients.vault import VaultAuthMethod, VaultCredentials, VaultError, VaultReader, VaultSettings
from environments import Environment

from .secrets import SecretEntry

Add = Callable[[str, str, str, str, str], None]  # (check, target, status, detail, hint)
ROLE_ENV, SECRET_ENV = "PREVIEW_VAULT_ROLE_ID", "PREVIEW_VAULT_SECRET_ID"


def check_preview_identity(env: Environment, vault_url: str | None, ca_bundle: str | None,
                           entries: list[SecretEntry], add: Add) -> None:
    target = f"preview identity ({env.name})"
    role_id, secret_id = os.environ.get(ROLE_ENV), os.environ.get(SECRET_ENV)
    if not vault_url or not role_id or not secret_id:
        why = "Vault not reachable" if not vault_url else f"{ROLE_ENV}/{SECRET_ENV} not set"
        add("preview identity", target, "SKIP", why, "")
        return
    from pydantic import SecretStr

    settings = VaultSettings(address=vault_url, auth_method=VaultAuthMethod.APPROLE, ca_bundle=ca_bundle)
    reader = VaultReader(settings, VaultCredentials(role_id=SecretStr(role_id), secret_id=SecretStr(secret_id)))
    key = f"gpuaas-{env.name}"
    paths = [f"transit/decrypt/{key}", f"transit/encrypt/{key}",
             *sorted({f"{env.vault.kv_mount}/data/{e.path}" for e in entries})]
    try:
        client = reader.client()
        caps = _capabilities(client, paths)
    except VaultError as e:
        add("preview identity", target, "FAIL", e.kind.value, str(e).split("; fix: ")[-1])
        return
    too_much = [p for p in paths[1:] if set(caps.get(p, [])) - {"deny"}]
    if "update" not in caps.get(paths[0], []):
        add("preview identity", target, "FAIL", f"cannot decrypt with transit key {key}",
            f'grant path "transit/decrypt/{key}" {{ capabilities = ["update"] }} to the preview AppRole')
    elif too_much:
        add("preview identity", target, "FAIL", f"not read-only: {len(too_much)} path(s) granted, e.g. {too_much[0]}",
            "the preview AppRole gets transit decrypt only (docs/operations.md, the pipeline's identities)")
    else:
        add("preview identity", target, "OK", f"decrypt with {key} only; no encrypt, no entry of the checklist", "")


def _capabilities(client: object, paths: list[str]) -> dict[str, list[str]]:
    resp = client.adapter.post("/v1/sys/capabilities-self", json={"paths": paths})  # type: ignore[attr-defined]
    data = resp if isinstance(resp, dict) else resp.json()
    data = data.get("data", data)
    return {p: list(data.get(p) or []) for p in paths}
