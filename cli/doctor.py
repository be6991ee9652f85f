"""`gpuaas-infra doctor <env>`: read-only pre-flight checks before anything is mutated.

Endpoints (reachability, TLS); Vault auth and every entry of `cli.secrets.secret_checklist`
(keys, shape); MAAS key and version; platform admin token (role) and contract; app service-account
tokens; S3 credentials, bucket, versioning; the previews' identity (read-only: doctor_preview.py); every host
artifact pin (doctor_pins.py). One row per check (OK/FAIL/SKIP, a fix hint per FAIL);
exit 1 on any FAIL, 2 on bad input. No value read from Vault is ever printed (docs/operations.md).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from enum import StrEnum
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, SecretStr

from clients.maas import MaasError, MaasSiteClient
from clients.platform import PlatformApiError, PlatformClient, RetryPolicy
from clients.platform.contract import API_VERSION
from clients.s3 import ArtifactStore, S3Error, S3Location, s3_credentials
from clients.tls import CaBundleError, trust, untrusted, untrusted_hint
from clients.vault import (
    VaultAuthMethod,
    VaultCredentials,
    VaultError,
    VaultErrorKind,
    VaultReader,
    VaultSettings,
    credentials_from_config,
)
from components.host_roles import host_secret_refs
from components.settings import EmbeddedEndpointMissing, StackSettings
from environments import Environment
from environments.ca_paths import resolve_ca
from environments.model import EndpointKind

from .doctor_pins import check_pins
from .doctor_preview import check_preview_identity
from .secrets import SHAPE_TEXT, SecretEntry, load, secret_checklist, shape_problem, stack_config
from .table import render_table

TIMEOUT_S = 5.0
CONTRACT_BROKEN, OUTSIDE = "invalid_response", "answer outside the contract"  # the platform client's code


class Status(StrEnum):
    OK = "OK"
    FAIL = "FAIL"
    SKIP = "SKIP"


class Row(BaseModel):
    model_config = ConfigDict(frozen=True)

    check: str
    target: str
    status: Status
    detail: str = ""
    hint: str = ""


class Doctor:
    """Runs the checks in dependency order; a check whose prerequisite failed is SKIP, not FAIL."""

    def __init__(self, env: Environment, settings: StackSettings, credentials: VaultCredentials) -> None:
        self.env, self.settings, self.credentials = env, settings, credentials
        self.rows: list[Row] = []
        self.reachable: dict[str, bool] = {}  # target URL -> answered
        self.platform_url = ""
        self.reader: VaultReader | None = None  # set once Vault answers

    def add(self, check: str, target: str, status: Status, detail: str = "", hint: str = "") -> None:
        self.rows.append(Row(check=check, target=target, status=status, detail=detail, hint=hint))

    def ok(self, check: str, target: str, detail: str) -> None:
        self.add(check, target, Status.OK, detail)

    def skip(self, check: str, target: str, detail: str) -> None:
        self.add(check, target, Status.SKIP, detail)

    def fail(self, check: str, target: str, detail: str, hint: str) -> None:
        self.add(check, target, Status.FAIL, detail, hint)

    def run(self) -> list[Row]:
        env = self.env
        vault_url = self.endpoint(env.vault.address, "vault", "vault")
        platform_url = self.endpoint(env.platform.url, "platform", "platform")
        s3_url = self.endpoint(env.artifact_store.endpoint_url, "s3", "s3")
        maas_urls = {s.name: self.endpoint(s.maas_url, "maas", f"maas[{s.name}]") for s in env.sites}
        for kind, url, probe in (
            (EndpointKind.VAULT, vault_url, "/v1/sys/health"),
            (EndpointKind.PLATFORM, platform_url, "/"),
            (EndpointKind.S3, s3_url, "/"),
        ):
            if url:
                self.probe(kind, kind.value, url, probe, verify=True)
        for site in env.sites:
            if maas_urls[site.name]:
                self.maas_version(site.name, maas_urls[site.name] or "", site.tls_verify)
        values = self.vault(vault_url)
        refs = host_secret_refs(env, self.settings.host_roles)
        check_preview_identity(env, vault_url if self.answered(vault_url) else None, self.ca(EndpointKind.VAULT),
                               secret_checklist(env, refs), lambda c, t, st, d, h: self.add(c, t, Status(st), d, h))
        for site in env.sites:
            self.maas_key(site.name, maas_urls[site.name], site.tls_verify, values.get(site.maas_api_key_path))
        self.platform_url = platform_url or ""
        self.platform(platform_url, values.get(env.platform.admin_token_path))
        self.app_tokens(platform_url, values)
        self.s3(s3_url, values.get(env.artifact_store.credentials_path))
        check_pins(env, self.settings, lambda c, t, st, d, h: self.add(c, t, Status(st), d, h))
        return self.rows

    # --- endpoints -------------------------------------------------------------------------------
    def endpoint(self, value: str, kind: str, name: str) -> str | None:
        try:
            return self.settings.endpoint(value, kind)
        except EmbeddedEndpointMissing as missing:
            self.fail("endpoint", name, "embedded, not resolved", str(missing))
            return None

    def ca(self, kind: EndpointKind) -> str | None:
        """The CA bundle the environment names for a kind, as a file path (None: system trust)."""
        return resolve_ca(self.env.ca_bundles.of(kind))

    def probe(
        self, kind: EndpointKind, label: str, url: str, path: str, verify: bool
    ) -> httpx.Response | None:
        """Reachability and TLS of one endpoint (verified with the kind's CA bundle); any HTTP answer
        (even 4xx/5xx) means reachable."""
        base = url.rstrip("/")
        target = f"{label} {base}"
        try:
            context = trust(self.ca(kind)) if verify else False
            resp = httpx.get(base + path, verify=context, timeout=TIMEOUT_S, follow_redirects=False)
        except CaBundleError as e:
            self.fail("tls", target, e.detail, e.hint(kind.value))
            self.reachable[base] = False
            return None
        except httpx.ConnectError as e:
            if untrusted(e):
                self.ok("reachable", target, "TCP connect")
                hint = untrusted_hint(kind.value, self.env.ca_bundles.of(kind))
                self.fail("tls", target, "certificate not trusted", f"{hint}; never turn verification off in prod")
            else:
                self.fail(
                    "reachable",
                    target,
                    f"connect failed: {str(e)[:80] or type(e).__name__}",
                    "check the URL, DNS, routes and firewall, and that the service runs",
                )
            self.reachable[base] = False
            return None
        except httpx.HTTPError as e:
            self.fail(
                "reachable",
                target,
                f"no answer ({type(e).__name__})",
                "check the service is up and not overloaded; nothing was changed",
            )
            self.reachable[base] = False
            return None
        self.reachable[base] = True
        self.ok("reachable", target, f"HTTP {resp.status_code}")
        if not base.startswith("https://"):
            self.skip("tls", target, "plain http (no TLS)")
        elif not verify:
            self.skip("tls", target, "tls_verify: false in the environment")
        else:
            named = self.env.ca_bundles.of(kind)
            self.ok("tls", target, f"certificate verified ({f'CA bundle {named}' if named else 'system trust'})")
        return resp

    def why_skipped(self, url: str | None, value: SecretStr | None, system: str) -> str:
        if not url:
            return f"{system} endpoint not resolved"
        if not self.answered(url):
            return f"{system} not reachable"
        return "no usable value from Vault" if value is None else "prerequisite failed"

    def answered(self, url: str | None) -> bool:
        return bool(url) and self.reachable.get((url or "").rstrip("/"), False)

    # --- Vault -----------------------------------------------------------------------------------
    def vault(self, url: str | None) -> dict[str, SecretStr]:
        roles = self.settings.host_roles
        entries = secret_checklist(self.env, host_secret_refs(self.env, roles))
        if not self.answered(url):
            self.skip("vault auth", url or "vault", "Vault not reachable")
            for e in entries:
                self.skip("vault entry", e.ref, "Vault not reachable")
            return {}
        settings = VaultSettings(
            address=url or "",
            kv_mount=self.env.vault.kv_mount,
            auth_method=VaultAuthMethod(self.env.vault.auth_method.value),
            timeout_s=TIMEOUT_S,
            ca_bundle=self.ca(EndpointKind.VAULT),
        )
        reader = self.reader = VaultReader(settings, self.credentials)
        values: dict[str, SecretStr] = {}
        auth_failure: VaultError | None = None
        paths: dict[str, dict[str, SecretStr] | VaultError] = {}
        for e in entries:
            if e.path not in paths:
                try:
                    paths[e.path] = reader.read_path(e.path)
                except VaultError as err:
                    paths[e.path] = err
                    if err.kind in (VaultErrorKind.AUTH_FAILED, VaultErrorKind.NO_CREDENTIALS, VaultErrorKind.SEALED):
                        auth_failure = auth_failure or err
        if auth_failure is not None:
            self.fail("vault auth", settings.address, auth_failure.kind.value, str(auth_failure).split("; fix: ")[-1])
            for e in entries:
                self.skip("vault entry", e.ref, "Vault auth failed")
            return {}
        self.ok("vault auth", settings.address, f"{settings.auth_method.value} login, mount {settings.kv_mount!r}")
        for e in entries:
            value = self.vault_entry(e, paths[e.path])
            if value is not None:
                values[e.ref] = value
        return values

    def vault_entry(self, e: SecretEntry, found: dict[str, SecretStr] | VaultError) -> SecretStr | None:
        mount = self.env.vault.kv_mount
        fill = f"see `gpuaas-infra secrets {self.env.name} --template`"
        if isinstance(found, VaultError):
            if found.kind is VaultErrorKind.PATH_MISSING:
                self.fail(
                    "vault entry",
                    e.ref,
                    "path missing",
                    f"vault kv put -mount={mount} {e.path} {e.key}=<{e.shape.value}> ({fill})",
                )
            else:
                self.fail("vault entry", e.ref, found.kind.value, str(found).split("; fix: ")[-1])
            return None
        if e.key not in found:
            self.fail(
                "vault entry",
                e.ref,
                f"key {e.key!r} missing (path has {len(found)} other key(s))",
                f"vault kv patch -mount={mount} {e.path} {e.key}=<{e.shape.value}> ({fill})",
            )
            return None
        problem = shape_problem(e.shape, found[e.key])
        if problem:
            self.fail(
                "vault entry", e.ref, f"wrong shape: {problem}", f"store {SHAPE_TEXT[e.shape]} under {e.key!r} ({fill})"
            )
            return None
        self.ok("vault entry", e.ref, f"present, {e.shape.value}")
        return found[e.key]

    # --- MAAS ------------------------------------------------------------------------------------
    def maas_version(self, site: str, url: str, tls_verify: bool) -> None:
        resp = self.probe(EndpointKind.MAAS, f"maas[{site}]", url, "/api/2.0/version/", verify=tls_verify)
        target = f"maas[{site}]"
        if resp is None:
            self.skip("maas version", target, "MAAS not reachable")
            return
        try:
            body: Any = resp.json()
            version = f"{body['version']} ({body.get('subversion', '')})"
        except (ValueError, KeyError, TypeError):
            self.fail("maas version", target, f"HTTP {resp.status_code}, not a MAAS version document",
                      "check the site's maas_url points at the region API (…/MAAS)")
            return
        self.ok("maas version", target, version)

    def maas_key(self, site: str, url: str | None, tls_verify: bool, key: SecretStr | None) -> None:
        target = f"maas[{site}]"
        if not self.answered(url) or key is None:
            self.skip("maas api key", target, self.why_skipped(url, key, "MAAS"))
            return
        client = MaasSiteClient(
            url or "", key.get_secret_value(), tls_verify=tls_verify, ca_bundle=self.ca(EndpointKind.MAAS)
        )
        try:
            user = client.whoami()
        except MaasError as e:
            if e.status in (401, 403):
                self.fail(
                    "maas api key",
                    target,
                    f"HTTP {e.status}: MAAS rejected the key",
                    f"write a valid key for {site} (MAAS UI > API keys) at {self.env.site(site).maas_api_key_path}",
                )
            else:
                self.fail("maas api key", target, f"authenticated read failed (HTTP {e.status})",
                          "check the MAAS region's health; nothing was changed")
            return
        self.ok("maas api key", target, f"authenticated as {user!r}")

    # --- platform --------------------------------------------------------------------------------
    def platform(self, url: str | None, token: SecretStr | None) -> None:
        if not self.answered(url) or token is None:
            why = self.why_skipped(url, token, "platform")
            self.skip("platform token", url or "platform", why)
            self.skip("platform contract", url or "platform", why)
            return
        ref, role = self.env.platform.admin_token_path, "the platform_admin role"
        probe = lambda api: api.list_sites(name="gpuaas-doctor")  # noqa: E731 - admin-only: proves the role
        err = self.platform_read("platform token", url or "", token, ref, role, probe)
        if err is None:
            self.ok("platform token", url or "", "accepted, role platform_admin")
            self.ok("platform contract", url or "", f"client contract {API_VERSION}; answers match it")
        elif err.code == CONTRACT_BROKEN:  # one fault, one FAIL row: the contract, not the token
            self.rows[-1] = self.rows[-1].model_copy(update={"status": Status.SKIP, "detail": OUTSIDE, "hint": ""})
            hint = "the platform answers outside the contract: align client and platform versions"
            self.fail("platform contract", url or "", f"client contract {API_VERSION}", hint)
        else:
            self.skip("platform contract", url or "", "platform token refused")

    def app_tokens(self, url: str | None, values: dict[str, SecretStr]) -> None:
        """Each app instance's service-account token: accepted, and scoped to the instance's project."""
        for app in self.env.app_instances:
            token, ref = values.get(app.service_account_token_path), app.service_account_token_path
            target = f"{app.name} (project {app.project_id})"
            if not self.answered(url) or token is None:
                self.skip("app token", target, self.why_skipped(url, token, "platform"))
                continue
            role = f"access to project {app.project_id}"
            read = lambda api, p=app.project_id, n=app.name: api.list_instances(p, name=n)  # noqa: E731
            err = self.platform_read("app token", target, token, ref, role, read)
            if err is None:
                self.ok("app token", target, "accepted in its project")
            elif err.code == CONTRACT_BROKEN:
                self.rows[-1] = self.rows[-1].model_copy(update={"status": Status.SKIP, "detail": OUTSIDE, "hint": ""})

    def platform_read(
        self, check: str, target: str, token: SecretStr, ref: str, role: str, read: Callable[[PlatformClient], object]
    ) -> PlatformApiError | None:
        try:
            with PlatformClient(
                self.platform_url, token, timeout=TIMEOUT_S, retry=RetryPolicy(attempts=1),
                ca_bundle=self.ca(EndpointKind.PLATFORM),
            ) as api:
                read(api)
        except PlatformApiError as e:
            hint = {
                401: f"the token at {ref} is not accepted ({e.details.get('reason', 'invalid')}); store a fresh one",
                403: f"the token at {ref} lacks {role}; store one that has it",
            }.get(e.status or 0, "see the platform's answer above; nothing was changed")
            self.fail(check, target, f"{e.status} {e.code} (correlation_id={e.correlation_id})", hint)
            return e
        return None

    # --- S3 --------------------------------------------------------------------------------------
    def s3(self, url: str | None, blob: SecretStr | None) -> None:
        a = self.env.artifact_store
        target = f"s3://{a.bucket}"
        if not self.answered(url) or blob is None or self.reader is None:
            self.skip("s3 bucket", target, self.why_skipped(url, blob, "S3"))
            return
        loc = S3Location(endpoint_url=url or "", bucket=a.bucket, region=a.region, path_style=a.path_style,
                         ca_bundle=self.ca(EndpointKind.S3))
        try:
            ArtifactStore(loc, s3_credentials(self.reader, a.credentials_path)).check_bucket()
        except VaultError as e:  # changed since the entry was read
            self.fail("s3 bucket", target, e.kind.value, str(e).split("; fix: ")[-1])
            return
        except S3Error as e:
            detail, _, hint = str(e).partition("; fix: ")
            self.fail("s3 bucket", target, f"{e.kind.value}: {detail}", hint)
            return
        self.ok("s3 bucket", target, "credentials accepted, bucket exists, versioning Enabled")


def render(rows: list[Row]) -> str:
    cells = [(r.check, r.target, r.status.value, r.detail) for r in rows]
    notes = [f"fix: {r.hint}" if r.status is Status.FAIL and r.hint else None for r in rows]
    out = render_table(("check", "target", "status", "detail"), cells, notes)
    failed = sum(r.status is Status.FAIL for r in rows)
    out.append("")
    out.append(f"{len(rows)} checks: {failed} FAIL, {sum(r.status is Status.SKIP for r in rows)} SKIP")
    return "\n".join(out) + "\n"


def doctor_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="gpuaas-infra doctor",
        description="Read-only pre-flight checks of an environment's endpoints, Vault entries and credentials.",
        epilog="Vault credentials: VAULT_TOKEN, or VAULT_ROLE_ID + VAULT_SECRET_ID (never flags); docs/operations.md",
    )
    parser.add_argument("env", help="environment name (environments/<env>.yaml) or a .yaml path")
    parser.add_argument("--stack", help="stack whose plain config to read (default: the environment name)")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="stack config value")
    args = parser.parse_args(argv)
    env = load(args.env)
    if env is None:
        return 2
    try:
        config = stack_config(args.stack or env.name, args.config)
    except ValueError as bad:
        sys.stderr.write(f"gpuaas-infra doctor: {bad}\n")
        return 2
    settings = StackSettings.from_config(args.stack or env.name, {**config, "environment": env.name})
    rows = Doctor(env, settings, credentials_from_config(config)).run()
    sys.stdout.write(render(rows))
    return 1 if any(r.status is Status.FAIL for r in rows) else 0
