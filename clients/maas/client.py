# size: every MAAS call the providers make, each one request over the one retrying request path
"""MAAS: the one module that talks to a MAAS region, over python-libmaas (unmodified) and HTTP.

Shared by every provider that needs MAAS (machines, RoCE links, node scripts): extend it, don't
fork it. Facts it relies on (DESIGN.md §3.2): python-libmaas 0.6.8's sync calls use
`asyncio.get_event_loop()`, so each worker thread gets its own loop first; ops 0.6.8 lacks
(`accept`, `set_storage_layout`, deploy `enable_hw_sync`, create with `commission=false`) are
called through the raw handlers of the describe document, which is what every call here does:
one method = one HTTP request, so request counts are predictable.

Errors become `MaasError(status, system_id)` whose message is MAAS's response body, never the
request (a deploy request carries user_data with an enrollment token). Reads, idempotent updates
(`idempotent=True`) and the describe request are retried through outages within a `RetryBudget`
(retry.py); other mutations are never retried here: the lifecycle re-reads and decides.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from maas.client.bones import CallError, SessionAPI
from maas.client.bones.helpers import RemoteError
from pydantic import ValidationError

from ..tls import trust, untrusted, untrusted_hint
from .budget import DEFAULT_BUDGET, MaasUnavailable, RetryBudget
from .parse import machine_detail, machine_details, machine_view, machine_views
from .retry import call_with_retry, status_of
from .verified import connect_verified, this_call
from .vocabulary import (
    EventView,
    MaasError,
    MachineDetail,
    MachineView,
    PowerSettings,
    ScriptResultView,
)

_sessions: dict[tuple[str, str, bool, str | None], SessionAPI] = {}
# How many machines a region-wide answer is sized for (its timeout): docs/scale.md plans 10,000 machines.
REGION_MACHINES = 10_000
_sessions_lock = threading.Lock()
# A session's connect (its describe request) under way: a provider's concurrent first calls (a refresh reads every
# resource at once) share its outcome, the session or the error, rather than each fetching the document.
_connecting: dict[tuple[str, str, bool, str | None], Future[SessionAPI]] = {}


def _ensure_loop() -> None:
    """python-libmaas needs a current event loop in this thread (provider worker threads have none)."""
    try:
        asyncio.get_event_loop()
    except RuntimeError:
        asyncio.set_event_loop(asyncio.new_event_loop())


def _url(url: str) -> str:
    return url if url.endswith("/") else url + "/"


class MaasClient:
    """A MAAS region reached with one API key. Cheap to make; the describe document is cached.
    `site` names the region in errors; `retry` bounds how long a safe call rides out an outage;
    `ca_bundle` is the PEM file of the private CA that signs the region's certificate (verified.py)."""

    def __init__(
        self,
        url: str,
        api_key: str,
        *,
        tls_verify: bool = True,
        site: str = "",
        retry: RetryBudget = DEFAULT_BUDGET,
        ca_bundle: str | None = None,
    ) -> None:
        self.url = _url(url)
        self._api_key = api_key
        self.tls_verify = tls_verify
        self.ca_bundle = ca_bundle
        self.site = site
        self.retry = retry
        self.requests = 0
        self._tags_seen: set[str] = set()  # tags known to exist in this region (they are never deleted by us)

    def _count(self) -> None:
        self.requests += 1

    # -- plumbing ------------------------------------------------------------------------------
    def _session(self) -> SessionAPI:
        key = (self.url, hashlib.sha256(self._api_key.encode()).hexdigest(), self.tls_verify, self.ca_bundle)
        with _sessions_lock:
            session = _sessions.get(key)
            if session is not None:
                return session
            flight = _connecting.get(key)
            if flight is None:
                flight = _connecting[key] = Future()
                first = True
            else:
                first = False
        if not first:
            return flight.result()  # the first caller's session, or its error
        try:
            session = self._connect()
        except BaseException as e:
            flight.set_exception(e)
            raise
        else:
            flight.set_result(session)
            with _sessions_lock:
                _sessions[key] = session
            return session
        finally:
            with _sessions_lock:
                del _connecting[key]

    def _connect(self) -> SessionAPI:
        """Connect: the describe request, retried like any other read."""
        _ensure_loop()

        def connect() -> SessionAPI:
            # Always our own dispatch: the CA (or the system store, or no verification when
            # tls_verify is off) and a per-request timeout (clients/maas/verified.py).
            context = trust(self.ca_bundle) if self.tls_verify else False
            return connect_verified(self.url, self._api_key, context, self.retry.request_timeout_s)

        try:  # the anonymous describe request: a read, retried like any other
            session = call_with_retry(
                connect,
                budget=self.retry,
                site=self.site,
                endpoint=f"{self.url}api/2.0/describe/",
                on_attempt=self._count,
            )
        except MaasUnavailable:
            raise
        except OSError as e:  # TimeoutError, ConnectionError (clients/maas/verified.py)
            if untrusted(e):
                raise self.untrusted_error() from None
            raise MaasError(f"MAAS of site {self.site or '?'} at {self.url} is unreachable: {e}") from None
        except (CallError, RemoteError) as e:
            status = status_of(e)
            raise MaasError(
                f"MAAS of site {self.site or '?'} at {self.url} refused the describe request: HTTP {status}",
                status=status,
            ) from None
        return session

    def _call(self, handler: str, action: str, *, read: bool, idempotent: bool = False, answer_machines: int = 0,
              answer_rows: int = 0, decode: Callable[[bytes], Any] | None = None, **params: Any) -> Any:
        """One request. Reads and `idempotent` updates are retried through outages (retry.py);
        anything else is sent once and its failure raised for the lifecycle to decide. `answer_machines` /
        `answer_rows`: the size of the answer expected (its timeout grows with it: RetryBudget.timeout_for);
        `decode`: how its JSON answer is read (None: as any JSON)."""
        system_id = params.get("system_id")
        _ensure_loop()
        fn = getattr(getattr(self._session(), handler), action)
        endpoint = f"{self.url} ({handler}.{action})"
        timeout = self.retry.timeout_for(answer_machines, answer_rows) if answer_machines or answer_rows else None

        def send() -> Any:
            with this_call(timeout, decode):
                return fn(**params)

        try:
            if read or idempotent:
                return call_with_retry(
                    send,
                    budget=self.retry,
                    site=self.site,
                    endpoint=endpoint,
                    system_id=system_id,
                    on_attempt=self._count,
                )
            self._count()
            return send()
        except MaasUnavailable:
            raise
        except CallError as e:
            body = (e.content or b"").decode("utf-8", "replace").strip()[:500]
            raise MaasError(
                f"MAAS {handler}.{action} -> HTTP {e.status}: {body}", status=e.status, system_id=system_id
            ) from None
        except ValidationError as e:  # an answer without what the client reads (not its values: owner data)
            first, n = e.errors()[0], e.error_count()
            where = ".".join(str(p) for p in first["loc"])
            raise MaasError(
                f"MAAS {handler}.{action}: an answer this client cannot read ({n} problem{'s' * (n != 1)}; "
                f"first at [{where}]: {first['msg']}); fix: check that {self.url} is a MAAS region of a "
                "supported version (2.0 API)",
                system_id=system_id,
            ) from None
        except OSError as e:  # TimeoutError, ConnectionError (clients/maas/verified.py)
            if untrusted(e):
                raise self.untrusted_error(system_id) from None
            raise MaasError(
                f"MAAS {handler}.{action}: connection failed: {type(e).__name__}: {e}", system_id=system_id
            ) from None

    def untrusted_error(self, system_id: str | None = None) -> MaasError:
        return MaasError(
            f"MAAS of site {self.site or '?'} at {self.url}: TLS certificate not trusted; fix: "
            + untrusted_hint("maas", self.ca_bundle),
            system_id=system_id,
        )

    def has_action(self, handler: str, action: str) -> bool:
        h = getattr(self._session(), handler, None)
        return h is not None and hasattr(h, action)

    # -- lookups (bulk: one request for many keys) ----------------------------------------------
    def by_hostnames(self, hostnames: list[str]) -> list[MachineView]:
        if not hostnames:
            return []
        return self._call("Machines", "read", read=True, answer_machines=len(hostnames), decode=machine_views,
                          hostname=hostnames)

    def by_macs(self, macs: list[str]) -> list[MachineView]:
        if not macs:
            return []
        return self._call("Machines", "read", read=True, answer_machines=len(macs), decode=machine_views,
                          mac_address=macs)

    def with_tag(self, tag: str) -> list[MachineView]:
        """Every machine carrying `tag` (one request)."""
        return self._call("Machines", "read", read=True, decode=machine_views, tags=[tag])

    def read_many(self, system_ids: list[str]) -> list[MachineView]:
        if not system_ids:
            return []
        return self._call("Machines", "read", read=True, answer_machines=len(system_ids), decode=machine_views,
                          id=system_ids)

    def by_power_addresses(self, addresses: list[str]) -> dict[str, str]:
        """power address -> system_id (one of them, if several machines share an address)."""
        return {a: sids[0] for a, sids in self.power_address_matches(addresses).items()}

    def power_address_matches(self, addresses: list[str]) -> dict[str, list[str]]:
        """power address -> every system_id with it. MAAS can't filter on it: one request for every machine
        of the region (so its timeout assumes `REGION_MACHINES`), made only for machines no other key found
        (resolve.py: not by system_id, hostname or PXE MAC). The answer carries every machine's BMC
        credentials: it is compared here and dropped before this returns; only matching system_ids leave."""
        if not addresses:
            return {}
        wanted = set(addresses)
        params = self._call("Machines", "power_parameters", read=True, answer_rows=REGION_MACHINES)
        out: dict[str, list[str]] = {}
        try:
            for sid, p in sorted((params or {}).items()):
                if isinstance(p, dict) and p.get("power_address") in wanted:
                    out.setdefault(str(p["power_address"]), []).append(sid)
        finally:
            del params  # the region's BMC passwords: not one reference kept past the comparison
        return out

    def detail(self, system_id: str) -> MachineDetail:
        detail: MachineDetail = self._call("Machine", "read", read=True, system_id=system_id, decode=machine_detail)
        return detail

    def poll_many(
        self, system_ids: list[str], detail_when: Callable[[MachineView], bool]
    ) -> list[tuple[MachineView, MachineDetail | None]]:
        """`read_many`, plus each picked machine's interfaces and block devices: MAAS's machine list
        carries them anyway, so the bulk poll that sees commissioning end also serves the preflight. The
        interfaces and disks are decoded, typed, only when a machine is picked (most polls pick none)."""
        if not system_ids:
            return []

        def decode(content: bytes) -> list[tuple[MachineView, MachineDetail | None]]:
            # Both decodes run inside the request's own, so an answer the detail cannot read is the coded
            # MaasError "an answer this client cannot read", like any other.
            views = machine_views(content)
            picked = {i for i, view in enumerate(views) if detail_when(view)}
            details = machine_details(content) if picked else []
            return [(view, details[i] if i in picked else None) for i, view in enumerate(views)]

        polled: list[tuple[MachineView, MachineDetail | None]] = self._call(
            "Machines", "read", read=True, answer_machines=len(system_ids), id=system_ids, decode=decode
        )
        return polled

    def recent_events(self, system_id: str, limit: int = 10) -> list[EventView]:
        """The machine's newest MAAS events, newest first (one request)."""
        if not self.has_action("Events", "query"):
            return []
        data = self._call("Events", "query", read=True, id=[system_id], limit=str(limit))
        return [
            EventView(type=str(e.get("type") or ""), description=str(e.get("description") or ""))
            for e in (data or {}).get("events") or []
        ]

    def last_event(self, system_id: str) -> str:
        """The newest MAAS event for the machine (what explains a failure)."""
        if self.has_action("Events", "query"):
            data = self._call("Events", "query", read=True, id=[system_id], limit="1")
            events = (data or {}).get("events") or []
            if events:
                e = events[0]
                return f"{e.get('type', '')}: {e.get('description', '')}".strip(": ")
        return self.detail(system_id).machine.status_message

    # -- mutations (never retried here) ---------------------------------------------------------
    def script_results(self, system_id: str, kind: str = "testing") -> list[ScriptResultView]:
        """Each script's result in the machine's current `kind` run (commissioning or testing), with its
        combined output: `GET nodes/{system_id}/results/current-<kind>/?include_output=true` (MAAS >= 2.2).
        [] when this MAAS has no script results API, or the machine has no such run yet."""
        if not self.has_action("NodeScriptResult", "read"):
            return []
        try:
            raw = self._call("NodeScriptResult", "read", read=True, system_id=system_id, id=f"current-{kind}",
                             include_output="true")
        except MaasError as e:
            if e.status in (400, 404):  # 400: MAAS >= 3 says "No current testing script set exists"
                return []
            raise
        return [
            ScriptResultView(name=str(r.get("name") or "?"), status=int(r.get("status") or 0),
                             status_name=str(r.get("status_name") or ""), exit_status=r.get("exit_status"),
                             output=_b64_text(r.get("output")))
            for r in (raw or {}).get("results") or []
        ]

    def create(
        self,
        *,
        hostname: str,
        pxe_mac: str,
        power_type: str,
        power_address: str,
        power_user: str | None,
        power_pass: str | None,
        commission: bool,
    ) -> MachineView:
        params: dict[str, Any] = {
            "architecture": "amd64/generic",
            "mac_addresses": [pxe_mac],
            "hostname": hostname,
            "power_type": power_type,
            "commission": commission,
        }
        if power_type != "manual":
            params["power_parameters_power_address"] = power_address
            if power_user:
                params["power_parameters_power_user"] = power_user
            if power_pass:
                params["power_parameters_power_pass"] = power_pass
        return machine_view(self._call("Machines", "create", read=False, **params))

    def accept(self, system_id: str) -> None:
        self._call("Machines", "accept", read=False, machines=[system_id])

    def commission(self, system_id: str, commissioning_scripts: list[str], testing_scripts: list[str]) -> None:
        params: dict[str, Any] = {"system_id": system_id}
        if commissioning_scripts:
            params["commissioning_scripts"] = ",".join(commissioning_scripts)
        params["testing_scripts"] = ",".join(testing_scripts) if testing_scripts else "none"
        self._call("Machine", "commission", read=False, **params)

    def set_hostname(self, system_id: str, hostname: str) -> None:
        self._call("Machine", "update", read=False, idempotent=True, system_id=system_id, hostname=hostname)

    def set_power(
        self, system_id: str, *, power_type: str, power_address: str, power_user: str | None, power_pass: str | None
    ) -> None:
        """Change the power driver in place (one Machine.update); callers read it back with
        `power_settings`, because MAAS answers 200 for parameters a driver silently ignores."""
        params: dict[str, Any] = {"system_id": system_id, "power_type": power_type}
        if power_type != "manual":
            params["power_parameters_power_address"] = power_address
            if power_user:
                params["power_parameters_power_user"] = power_user
            if power_pass:
                params["power_parameters_power_pass"] = power_pass
        self._call("Machine", "update", read=False, idempotent=True, **params)

    def power_settings(self, system_id: str) -> PowerSettings:
        """The power type and parameters MAAS holds now (the password is not read back)."""
        raw = self._call("Machine", "read", read=True, system_id=system_id)
        params = self._call("Machine", "power_parameters", read=True, system_id=system_id) or {}
        return PowerSettings(
            power_type=str(raw.get("power_type") or ""),
            power_address=params.get("power_address"),
            power_user=params.get("power_user"),
        )

    def set_boot_disk(self, system_id: str, block_device_id: int) -> None:
        self._call("BlockDevice", "set_boot_disk", read=False, idempotent=True, system_id=system_id, id=block_device_id)

    def set_storage_layout(self, system_id: str, layout: str, boot_device_id: int, root_size_gb: int | None) -> None:
        params: dict[str, Any] = {"system_id": system_id, "storage_layout": layout, "root_device": boot_device_id}
        if root_size_gb:
            params["root_size"] = f"{root_size_gb}G"
        self._call("Machine", "set_storage_layout", read=False, idempotent=True, **params)

    def link_static(self, system_id: str, interface_id: int, subnet_cidr: str, address: str) -> None:
        self._call(
            "Interface",
            "link_subnet",
            read=False,
            system_id=system_id,
            id=interface_id,
            mode="STATIC",
            subnet=f"cidr:{subnet_cidr}",
            ip_address=address,
        )

    def unlink(self, system_id: str, interface_id: int, link_id: int) -> None:
        self._call("Interface", "unlink_subnet", read=False, system_id=system_id, id=interface_id, _id=link_id)

    def set_owner_data(self, system_id: str, data: dict[str, str | None]) -> None:
        fields: dict[str, Any] = {k: ("" if v is None else v) for k, v in data.items()}
        self._call("Machine", "set_owner_data", read=False, idempotent=True, system_id=system_id, **fields)

    def deploy(
        self, system_id: str, *, user_data: bytes, distro_series: str, hwe_kernel: str | None, enable_hw_sync: bool
    ) -> None:
        params: dict[str, Any] = {
            "system_id": system_id,
            "user_data": base64.b64encode(user_data),
            "distro_series": distro_series,
        }
        if hwe_kernel:
            params["hwe_kernel"] = hwe_kernel
        if enable_hw_sync:
            params["enable_hw_sync"] = True
        self._call("Machine", "deploy", read=False, **params)

    def release(self, system_id: str, *, erase: bool, secure_erase: bool, quick_erase: bool, force: bool) -> None:
        self._call(
            "Machine",
            "release",
            read=False,
            system_id=system_id,
            erase=erase,
            secure_erase=secure_erase,
            quick_erase=quick_erase,
            force=force,
        )

    def power_off(self, system_id: str) -> None:
        self._call("Machine", "power_off", read=False, idempotent=True, system_id=system_id)

    def abort(self, system_id: str) -> None:
        self._call("Machine", "abort", read=False, system_id=system_id)

    def set_tags(self, system_id: str, tags: list[str], remove: list[str] | None = None) -> None:
        for tag in tags:
            self.tag_machines(tag, add=[system_id])
        for tag in remove or ():
            if tag not in tags:
                self.tag_machines(tag, remove=[system_id])

    def tag_machines(self, tag: str, *, add: Sequence[str] = (), remove: Sequence[str] = ()) -> None:
        """Add and remove `tag` on many machines in one request (creating the tag once if MAAS lacks it;
        removing a tag MAAS lacks is nothing to do)."""
        if not add and not remove:
            return
        if tag not in self._tags_seen:
            existing = {t["name"] for t in self._call("Tags", "read", read=True)}
            self._tags_seen |= existing
            if tag not in existing:
                if not add:
                    return
                try:
                    self._call("Tags", "create", read=False, name=tag)
                except MaasError as e:
                    # Another run (or another machine of this one) created it first: adopt it.
                    if e.status != 400 or "already exists" not in str(e):
                        raise
                self._tags_seen.add(tag)
        params: dict[str, Any] = {"add": list(add)} if add else {}
        if remove:
            params["remove"] = list(remove)
        self._call("Tag", "update_nodes", read=False, idempotent=True, name=tag, **params)


def _b64_text(value: object) -> str:
    """A base64 field of MAAS's script results as text ("" when absent or not base64)."""
    if not isinstance(value, str) or not value:
        return ""
    try:
        return base64.b64decode(value).decode("utf-8", errors="replace")
    except ValueError:  # binascii.Error included
        return ""
