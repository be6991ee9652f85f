"""The seeds' rules as pure functions over resource properties (no pulumi_policy import here).

`__main__.py` wraps each as a mandatory CrossGuard policy; tests call these directly too. Every
function returns human messages naming the resource field and the fix. Property values may be the
policy SDK's unknown-checking proxies: reading an unknown (preview) raises `UnknownValueError`;
the walkers skip such values instead of giving up on the whole resource.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# seed 003 / environments.model.CONTROL_PLANE_AND_CI_ROLES (a test keeps the two equal)
CONTROL_PLANE_AND_CI_ROLES = frozenset({"platform_control", "app_control", "control_plane_k3s", "gitlab", "runner"})
WORKER_ROLE = "worker_compute"
GPU_TAG = "worker-compute"


def _ci_roles(host: Any) -> set[str]:
    """Control-plane/CI roles of a host, minus seed 003's one exception: the GPU lane's runner on a
    worker_compute host, serving the worker-compute tag only (environments/rules.py, ROLE001)."""
    bad = _roles(host) & CONTROL_PLANE_AND_CI_ROLES
    if list(_field(host, "runner_tags") or []) == [GPU_TAG]:
        bad.discard("runner")
    return bad
# An AppInstance's topology calls a MAAS machine that is not a declared host a `gpu_node`.
WORKER_ROLES = frozenset({WORKER_ROLE, "gpu_node"})
# App component keys that are control-plane members when the instance does not say (seed 004).
DEFAULT_CONTROL_PLANE_KEYS = frozenset({"controller", "head", "control_plane", "scheduler", "server"})
PROD_ENVIRONMENTS = frozenset({"prod", "production"})
NO_ERASE = frozenset({"none", "no_erase", "never"})

_SECRET_NAME = re.compile(r"(password|passwd|secret|token|api_?key|private_?key|credential|oauth)", re.I)
# Names that say "where the secret lives" or describe it; their values are references, not secrets.
_REFERENCE_NAME = re.compile(r"(_path|_ref|_digest|_id|_name|_mount|_role|_ttl|_seconds|_url|_file)$", re.I)
_VAULT_REF = re.compile(r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*#[A-Za-z0-9_.-]+$")
_SECRET_VALUE = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----"  # PEM private keys
    r"|\bhvs\.[A-Za-z0-9_-]{20,}"  # Vault/OpenBao service tokens
    r"|\bglpat-[A-Za-z0-9_-]{20}"  # GitLab personal/project access tokens
    r"|\bAKIA[0-9A-Z]{16}\b"  # AWS access key ids
)
# Node SSH material in an app's inputs (seed 000 §1); the same patterns as environments/rules_values.py
# (tests/policy/test_rules.py keeps them equal: this pack runs in its own environment).
_SSH_KEY_NAME = re.compile(r"(ssh|authorized_keys|known_hosts|id_rsa|id_ed25519|id_ecdsa|host_key|private[_-]?key)",
                           re.I)
_SSH_VALUE = re.compile(r"(-----BEGIN [A-Z ]*PRIVATE KEY-----|^\s*(ssh-(rsa|ed25519|dss)|ecdsa-sha2-nistp\d+|"
                        r"sk-ssh-ed25519@openssh\.com) AAAA)")
_TLS_KEYS = frozenset({"tls_verify", "maas_tls_verify", "verify_tls"})
_ERASE_KEYS = frozenset({"release_erase_mode", "erase_mode"})


@dataclass(frozen=True)
class Res:
    """One resource as the analyzer hands it over: what the rules need and nothing else."""

    urn: str
    type: str
    props: Mapping[str, Any]
    protect: bool = False

    @property
    def kind(self) -> str:
        return self.type.rsplit(":", 1)[-1]

    @property
    def name(self) -> str:
        return self.urn.split("::")[-1] if "::" in self.urn else self.urn


def is_prod(environment: str) -> bool:
    return environment in PROD_ENVIRONMENTS or environment.startswith("prod-")


def _get(obj: Any, key: Any) -> tuple[bool, Any]:
    """(True, value), or (False, None) when the value is unknown during preview."""
    try:
        return True, obj[key]
    except Exception as exc:  # the SDK's UnknownValueError; anything else is a real error
        if type(exc).__name__ == "UnknownValueError":
            return False, None
        raise


def walk(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(path, leaf) for every known leaf; `__` keys (engine plumbing) skipped."""
    if isinstance(value, Mapping):
        for key in list(value):
            if str(key).startswith("__"):
                continue
            ok, item = _get(value, key)
            if ok:
                yield from walk(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, Sequence) and not isinstance(value, str | bytes):
        for i in range(len(value)):
            ok, item = _get(value, i)
            if ok:
                yield from walk(item, f"{path}[{i}]")
    elif isinstance(decoded := _json_document(value), Mapping | list):
        yield from walk(decoded, path)  # a document carried as one string (a pool's machine specs)
    else:
        yield path, value


def _json_document(value: Any) -> Any:
    """The JSON object or array a string input carries, else None."""
    if not isinstance(value, str) or not value.startswith(("{", "[")):
        return None
    try:
        return json.loads(value)
    except ValueError:
        return None


def _leaf(path: str) -> str:
    return path.rsplit(".", 1)[-1].split("[", 1)[0]


def _field(props: Mapping[str, Any], *path: str) -> Any:
    cur: Any = props
    for key in path:
        # `key in mapping` would read the value (and raise on an unknown); iterate the keys instead.
        if not isinstance(cur, Mapping) or key not in set(cur):
            return None
        ok, cur = _get(cur, key)
        if not ok:
            return None
    return cur


def _list(value: Any) -> list[Any]:
    if isinstance(value, Mapping):
        return [dict(_field(value, k) or {}, hostname=k) for k in list(value)]
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [item for ok, item in (_get(value, i) for i in range(len(value))) if ok]
    return []


# -- 1. no control-plane or CI role on a worker_compute host ----------------------------------
def hosts_of(res: Res) -> list[Mapping[str, Any]]:
    """HostConvergence carries the compiled inventory: each host with its effective roles."""
    return [h for h in _list(_field(res.props, "hosts")) if isinstance(h, Mapping)]


def _roles(host: Mapping[str, Any]) -> set[str]:
    roles = set(_list(_field(host, "roles"))) | set(_list(_field(host, "extra_roles")))
    return {str(r) for r in roles}


def worker_roles(res: Res) -> list[str]:
    out = []
    for host in hosts_of(res):
        if _field(host, "logical_role") != WORKER_ROLE:
            continue
        bad = sorted(_ci_roles(host))
        if bad:
            out.append(
                f"host {_field(host, 'hostname')} is worker_compute but runs {', '.join(bad)}; "
                "move these roles to a platform_control or app_control host (seed 003)"
            )
    return out


def machine_hostnames(res: Res) -> list[str]:
    if res.kind == "MaasMachine":
        name = _field(res.props, "machine", "hostname") or _field(res.props, "hostname")
        return [str(name)] if name else []
    if res.kind == "MachinePool":
        machines = _field(res.props, "machines")
        if isinstance(machines, Mapping):  # hostname -> the spec as one JSON string (a pool's input)
            return [str(h) for h in machines]
        return [  # inputs written before specs became one string each
            str(_field(m, "hostname"))
            for m in _list(machines)
            if isinstance(m, Mapping) and _field(m, "hostname")
        ]
    return []


def worker_hosts_with_control_roles(resources: Sequence[Res]) -> list[tuple[str, str]]:
    """Stack-wide: a MAAS machine is a GPU worker; no HostConvergence host of that name runs control roles."""
    machines = {h for r in resources for h in machine_hostnames(r)}
    out = []
    for r in resources:
        for host in hosts_of(r):
            name = str(_field(host, "hostname"))
            bad = sorted(_ci_roles(host))
            if name in machines and bad:
                out.append(
                    (
                        r.urn,
                        f"host {name} is a MAAS GPU machine but runs {', '.join(bad)}; "
                        "GPU workers carry worker_compute roles only (seed 003)",
                    )
                )
    return out


# -- 2. app control-plane members never on worker_compute hosts -------------------------------
def worker_hostnames(resources: Sequence[Res]) -> set[str]:
    """MAAS machines, hosts declared worker_compute, and nodes an AppInstance's topology calls GPU nodes."""
    workers = {h for r in resources for h in machine_hostnames(r)}
    declared = {}
    for r in resources:
        for host in hosts_of(r):
            declared[str(_field(host, "hostname"))] = _field(host, "logical_role")
        topology = _field(r.props, "topology") if r.kind == "AppInstance" else None
        if isinstance(topology, Mapping):
            for node in list(topology):
                role = _field(topology, node)
                declared.setdefault(str(node), WORKER_ROLE if role in WORKER_ROLES else role)
    workers |= {h for h, role in declared.items() if role == WORKER_ROLE}
    return {h for h in workers if declared.get(h, WORKER_ROLE) == WORKER_ROLE}


def app_members(res: Res) -> Mapping[str, Any]:
    """component key -> {count, nodes}: `instance.members` (AppInstance provider) or `members`."""
    members = _field(res.props, "instance", "members")
    if not isinstance(members, Mapping):
        members = _field(res.props, "members")
    return members if isinstance(members, Mapping) else {}


def control_plane_keys(res: Res) -> set[str]:
    """From the blueprint the instance carries, else a member's own flag, else the usual names."""
    members = app_members(res)
    keys = {str(k) for k in _list(_field(res.props, "control_plane_keys"))}
    declared = _field(res.props, "blueprint", "app", "component_keys")
    for key in list(members):
        flag = _field(declared, key, "control_plane") if isinstance(declared, Mapping) else None
        if flag is None:
            flag = _field(members, key, "control_plane")
        if flag is True or (flag is None and key in DEFAULT_CONTROL_PLANE_KEYS):
            keys.add(str(key))
    return keys


def app_members_on_workers(resources: Sequence[Res]) -> list[tuple[str, str]]:
    workers = worker_hostnames(resources)
    out = []
    for r in resources:
        if r.kind != "AppInstance":
            continue
        members = app_members(r)
        for key in sorted(control_plane_keys(r)):
            for node in [str(n) for n in _list(_field(members, key, "nodes"))]:
                if node in workers:
                    out.append(
                        (
                            r.urn,
                            f"{r.name}: control-plane member {key!r} is placed on {node}, a "
                            "worker_compute host; place it on an app_control host (seed 003/004)",
                        )
                    )
    return out


# -- 3. machines and pools in prod are protected --------------------------------------------
def _prod(res: Res, environment: str) -> bool:
    """Prod by the stack's environment, or by the resource's own `tier` input (SiteProfile carries it)."""
    tier = _field(res.props, "tier")
    return is_prod(environment) or (isinstance(tier, str) and is_prod(tier))


def unprotected_in_prod(res: Res, environment: str) -> list[str]:
    if res.kind in ("MaasMachine", "MachinePool") and _prod(res, environment) and not res.protect:
        return [
            f"{res.kind} {res.name} in {environment} is not protected; declare it with "
            "ResourceOptions(protect=True) so a deleted line can't release production machines"
        ]
    return []


# -- 4. no input that looks like a secret in plaintext ---------------------------------------
def plaintext_secrets(res: Res) -> list[str]:
    out = []
    for path, value in walk(res.props):
        if not isinstance(value, str) or not value or value == "[secret]":
            continue
        leaf = _leaf(path)
        named = bool(_SECRET_NAME.search(leaf)) and not _REFERENCE_NAME.search(leaf) and not _VAULT_REF.match(value)
        if named or _SECRET_VALUE.search(value):
            out.append(
                f"input {path} looks like a secret in plaintext; put it in Vault and pass its "
                "reference (<path>#<key>) instead (DESIGN.md §4)"
            )
    return out


# -- 5. MAAS TLS verification off only outside prod ------------------------------------------
def tls_off_in_prod(res: Res, environment: str) -> list[str]:
    if not _prod(res, environment):
        return []
    return [
        f"input {path} is false in {environment}; MAAS TLS verification may be off only outside prod"
        for path, value in walk(res.props)
        if _leaf(path) in _TLS_KEYS and value is False
    ]


# -- 6. profiles on customer-handoff sites must not erase -------------------------------------
def _erases(props: Mapping[str, Any]) -> list[str]:
    return [
        f"{path}={value}"
        for path, value in walk(props)
        if (_leaf(path) in _ERASE_KEYS and isinstance(value, str) and value not in NO_ERASE)
        or (_leaf(path) == "erase_on_release" and value is True)
    ]


def handoff_erase(res: Res) -> list[str]:
    """A resource that says its site is customer-handoff (e.g. a SiteProfile) and erases."""
    flagged = any(_leaf(p) == "customer_handoff" and v is True for p, v in walk(res.props))
    if not flagged:
        return []
    return [
        f"{res.name} is on a customer-handoff site but erases on release ({', '.join(found)}); "
        "set release_erase_mode: none (seed 002: do not touch the customer's disks)"
        for found in [_erases(res.props)]
        if found
    ]


def handoff_sites(resources: Sequence[Res]) -> set[str]:
    out = set()
    for r in resources:
        if any(_leaf(p) == "customer_handoff" and v is True for p, v in walk(r.props)):
            site = _field(r.props, "site")
            name = _field(site, "name") if isinstance(site, Mapping) else site
            if name:
                out.add(str(name))
    return out


def machines_erasing_on_handoff_sites(resources: Sequence[Res]) -> list[tuple[str, str]]:
    sites = handoff_sites(resources)
    out = []
    for r in resources:
        if r.kind not in ("MaasMachine", "MachinePool"):
            continue
        site = _field(r.props, "connection", "maas", "site") or _field(r.props, "machine", "site")
        erase = _field(r.props, "policy", "release_erase_mode")
        if site in sites and isinstance(erase, str) and erase not in NO_ERASE:
            out.append(
                (
                    r.urn,
                    f"{r.kind} {r.name} is on customer-handoff site {site} but "
                    f"policy.release_erase_mode is {erase}; use none",
                )
            )
    return out


# -- 7. no app instance carries node SSH credentials (seed 000 §1) -----------------------------
def node_ssh_credentials_in_apps(res: Res) -> list[str]:
    """An AppInstance whose inputs (app config) name or hold SSH material: the non-negotiable rule says no
    third party receives raw node SSH credentials; node mutations go through the platform's typed tasks."""
    if res.kind != "AppInstance":
        return []
    inputs = _field(res.props, "instance", "inputs")
    out = []
    for path, value in walk(inputs if isinstance(inputs, Mapping) else {}, "instance.inputs"):
        if _SSH_KEY_NAME.search(_leaf(path)) or (isinstance(value, str) and _SSH_VALUE.search(value)):
            out.append(
                f"{res.name}: input {path} looks like node SSH material; apps never receive node SSH "
                "credentials: node changes go through the platform's typed tasks (seed 000 §1)"
            )
    return out
