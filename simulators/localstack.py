"""The local stack's world: the embedded simulators, seeded from the `local` environment.

`maas_inventory(env)` turns an environment into the MAAS simulator's inventory (sites as zones, a
PXE subnet per site, the RoCE pools' subnets per rail, the machines racked with their BMC and PXE
MAC). `LocalStack` (used by `make demo` and the end-to-end tests) starts the MAAS and platform
simulators, OpenBao and an S3 server, seeds Vault with the environment's secrets, and returns the
stack config the engine (or the real CLI) needs.

`machine_backend=MachineBackend.NSPAWN` puts a real systemd-nspawn node behind every machine MAAS
deploys (simulators/maas/nspawn.py): a lab network (lab/node.py) comes up first, and MAAS, the platform
and the S3 server listen on its gateway address, the nodes' only route. `MachineBackend.FAST` (the
default) enrolls each deployed machine from the simulator itself: nothing boots.
"""

from __future__ import annotations

import json
import secrets
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from clients.platform.models import Role
from environments import Environment, load_environment
from environments.model_node import LoginUser
from simulators.maas import MaasSimulator, MachineBackend, SimInventory
from simulators.openbao import OpenBaoDevServer
from simulators.platform import PlatformSimulator
from simulators.s3 import MotoS3Server

if TYPE_CHECKING:
    from lab.node import NodeLab
    from simulators.maas.nspawn import NspawnNodes

# The lifecycle's deadlines with real nodes (Deadlines.scaled): deploy 180 s, enrollment 90 s, polls 0.25-0.75 s.
NSPAWN_MACHINE_TIME_SCALE = 0.05

# Environment SKU -> simulator hardware model.
SIM_SKU = {"h200": "h200", "cpu-small": "generic-small"}


def maas_inventory(env: Environment, *, enlisted: bool = False) -> SimInventory:
    """`enlisted=False`: machines are racked but unknown to MAAS until the provider creates them."""
    sites: list[dict[str, Any]] = []
    fabrics: list[dict[str, Any]] = []
    subnets: list[dict[str, Any]] = []
    machines: list[dict[str, Any]] = []
    for i, site in enumerate(env.sites):
        sites.append({"name": site.name})
        fabrics.append({"name": f"pxe-{site.name}"})
        subnets.append(
            {
                "cidr": f"192.168.{100 + i}.0/24",
                "fabric": f"pxe-{site.name}",
                "site": site.name,
                "role": "pxe",
                "gateway_ip": f"192.168.{100 + i}.1",
            }
        )
        pools = env.roce_pools_of(site.name)
        if pools:
            vids = sorted({p.vlan or 0 for p in pools} | {0})
            fabrics.append({"name": f"roce-{site.name}", "vlans": [{"vid": v, "mtu": 9000} for v in vids]})
            subnets += [
                {
                    "cidr": str(p.subnet),
                    "fabric": f"roce-{site.name}",
                    "vid": p.vlan or 0,
                    "site": site.name,
                    "role": "roce",
                    "rail": p.rail,
                }
                for p in pools
            ]
    for m in env.machines:
        machines.append(
            {
                "hostname": m.hostname,
                "pxe_mac": m.pxe_mac,
                "ipmi_address": str(m.ipmi_address),
                "sku": SIM_SKU.get(m.sku, "generic-small"),
                "site": m.site,
                "status": "New",
                "enlisted": enlisted,
            }
        )
    return SimInventory.model_validate({"sites": sites, "fabrics": fabrics, "subnets": subnets, "machines": machines})


# ---------------------------------------------------------------------------------------------
# The running world


class LocalStack:
    """Starts the embedded simulators for an environment and seeds Vault with its secrets.

        with LocalStack("local") as world:
            engine = Engine(".", "local", state, config_overrides=world.stack_config())

    Every server binds 127.0.0.1 on an ephemeral port and stops with the context.
    """

    def __init__(
        self,
        env_name: str | Path = "local",
        *,
        maas_time_scale: float = 1e-3,
        platform_time_scale: float = 0.01,
        enlisted: bool = False,
        machine_backend: MachineBackend = MachineBackend.FAST,
        node_knobs: dict[str, dict[str, str]] | None = None,
    ) -> None:
        """`env_name`: an environment's name or the path of its file. `node_knobs` (NSPAWN): lab stand-in
        settings per hostname, e.g. {"local-gpu-2": {"gpus": "7"}}."""
        self.env = load_environment(env_name)
        # an environment given by its file: the stack must read that file too (stack_config says so)
        self.environment_file = Path(env_name) if Path(env_name).suffix in (".yaml", ".yml") else None
        self.maas_time_scale = maas_time_scale
        self.platform_time_scale = platform_time_scale
        self.enlisted = enlisted
        self.machine_backend = machine_backend
        self.node_knobs = node_knobs
        self.lab: NodeLab | None = None
        self.vault: OpenBaoDevServer | None = None
        self.s3: MotoS3Server | None = None
        self.platform: PlatformSimulator | None = None
        self.maas: MaasSimulator | None = None
        self.platform_admin_token = ""
        self.project_ids: dict[str, str] = {}

    def __enter__(self) -> LocalStack:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> LocalStack:
        env = self.env
        host, nodes = "127.0.0.1", None
        if self.machine_backend is MachineBackend.NSPAWN:
            host, nodes = self._start_lab()
        self.vault = OpenBaoDevServer().start()  # only the providers read Vault: it stays on 127.0.0.1
        self.s3 = MotoS3Server(host=host).start()
        self.s3.create_bucket(env.artifact_store.bucket, versioning=True)
        self.platform = PlatformSimulator(time_scale=self.platform_time_scale, host=host).start()
        fast = self.machine_backend is MachineBackend.FAST
        self.maas = MaasSimulator(
            maas_inventory(env, enlisted=self.enlisted), time_scale=self.maas_time_scale,
            platform_url=self.platform.url if fast else None, enroll_backend=self.machine_backend, nodes=nodes,
        )
        self.maas.start()
        self._seed_platform()
        self._seed_vault()
        return self

    def _start_lab(self) -> tuple[str, NspawnNodes]:
        """The lab network with a slot for every machine (lab/node.py); nodes boot as MAAS deploys them."""
        from lab.node import NodeLab
        from simulators.maas.nspawn import NspawnNodes

        self.lab = NodeLab([m.hostname for m in self.env.machines])
        self.lab.start()
        return self.lab.gateway, NspawnNodes(self.lab, self.node_knobs)

    @property
    def nodes(self) -> NspawnNodes | None:
        """The real nodes behind the machines (NSPAWN backend), else None."""
        return self.maas.nodes if self.maas is not None else None

    def _seed_platform(self) -> None:
        assert self.platform is not None
        self.platform_admin_token = self.platform.issue_token(Role.PLATFORM_ADMIN, name="gpuaas-infra")
        tenant = self.platform.create_tenant(self.env.name)
        for app in self.env.app_instances:
            if app.project_id not in self.project_ids:
                self.project_ids[app.project_id] = self.platform.create_project(
                    tenant, app.project_id, project_id=app.project_id
                )

    def _seed_vault(self) -> None:
        assert self.vault and self.maas and self.platform
        env = self.env
        values: dict[str, str] = {}
        for site in env.sites:
            values[site.maas_api_key_path] = self.maas.api_key
        values[env.platform.admin_token_path] = self.platform_admin_token
        for app in env.app_instances:
            values[app.service_account_token_path] = self.platform.issue_token(
                Role.SERVICE_ACCOUNT, project_id=app.project_id, name=f"sa-{app.name}"
            )
        values[env.artifact_store.credentials_path] = json.dumps(
            {"access_key_id": "local-bundle-publisher", "secret_access_key": secrets.token_hex(16)}
        )
        key_pem = _ssh_private_key()
        for host in env.hosts:
            values[host.ssh_key_path] = key_pem
        for user in _login_users(env):  # a profile's login user: public keys and a password hash, read at deploy
            for ref in user.ssh_authorized_keys:
                values[ref] = _ssh_public_key(f"{user.name}@{env.name}")
            if user.password.hash_ref:
                values[user.password.hash_ref] = _password_hash()
        by_path: dict[str, dict[str, str]] = {}
        for ref, value in values.items():
            path, key = ref.split("#", 1)
            by_path.setdefault(path, {})[key] = value
        for path, data in by_path.items():
            self.vault.put_secret(env.vault.kv_mount, path, data)

    def stack_config(self, machine_time_scale: float | None = None) -> dict[str, str]:
        """Stack config for the engine or `pulumi config set` (the Vault token is the dev root token)."""
        assert self.vault and self.s3 and self.platform and self.maas
        scale = machine_time_scale if machine_time_scale is not None else self.maas_time_scale
        if machine_time_scale is None and self.machine_backend is MachineBackend.NSPAWN:
            scale = NSPAWN_MACHINE_TIME_SCALE  # a real node takes seconds to deploy, not MAAS-time milliseconds
        by_file = {"gpuaas-infra:environment": str(self.environment_file)} if self.environment_file else {}
        return {
            **by_file,
            "gpuaas-infra:embedded_maas_url": self.maas.url,
            "gpuaas-infra:embedded_platform_url": self.platform.url,
            "gpuaas-infra:embedded_vault_url": self.vault.address,
            "gpuaas-infra:embedded_s3_url": self.s3.endpoint_url,
            "gpuaas-infra:vault_token": self.vault.root_token,
            "gpuaas-infra:machine_time_scale": repr(scale),
        }

    def secret_values(self) -> list[str]:
        """Every secret this world handed out (for state-file and log scans in tests)."""
        assert self.vault and self.maas
        out = [self.vault.root_token, self.maas.api_key, self.platform_admin_token]
        client = self.vault.client()
        for ref in _refs(self.env):
            path, key = ref.split("#", 1)
            data = client.secrets.kv.v2.read_secret_version(
                path=path, mount_point=self.env.vault.kv_mount, raise_on_deleted_version=True
            )["data"]["data"]
            out.append(data[key])
            if data[key].startswith("{"):
                out += [v for v in json.loads(data[key]).values() if isinstance(v, str) and len(v) >= 16]
        return [s for s in out if s]

    def stop(self) -> None:
        for server in (self.maas, self.platform, self.s3, self.vault, self.lab):  # the lab (nodes' network) last
            if server is not None:
                try:
                    server.stop()
                except Exception:  # noqa: BLE001 - stopping the others matters more
                    pass
        self.maas = self.platform = self.s3 = self.vault = None
        self.lab = None


# What a lab node can run (lab/node.py): no packages (the lab has no mirror), no MAAS hardware-sync timer.
# The bundle's other steps run as written, the storage step too: the profile's storage layout is kept, and
# the NSPAWN backend gives each node the machine's non-boot block devices as loop-device data disks (an
# H200's nvme0n1..nvme7n1, the layout's data_devices), so /share0..N are real ext4 mounts. The enrollment
# token's TTL is in the platform simulator's time, which runs 100x fast (platform_time_scale 0.01): the
# local profile's 900 s are 9 real seconds, less than four real nodes booting at once on two cores take
# (their enrollment was refused as expired); 18000 s are 180 real seconds.
LAB_NODE_PROFILE: dict[str, Any] = {"require_hw_sync": False, "enrollment_token_ttl_seconds": 18000}


def write_lab_environment(source: Path, dest: Path, machines: list[str] | None = None) -> Path:
    """A copy of an environment file that real lab nodes can deploy: `LAB_NODE_PROFILE` on every site
    profile, no vendor packages, and (when given) only `machines` kept. The copy keeps the environment's name."""
    import yaml

    doc = yaml.safe_load(source.read_text())
    for site in doc.get("sites", []):
        for profile in site.get("profiles", []):
            profile.update(LAB_NODE_PROFILE)
    for bundle in doc.get("bootstrap_bundles", []):
        bundle["vendor_packages"] = {}
    if machines is not None:
        doc["machines"] = [m for m in doc.get("machines", []) if m["hostname"] in machines]
    dest.write_text(yaml.safe_dump(doc, sort_keys=False))
    return dest


def _refs(env: Environment) -> list[str]:
    refs = [s.maas_api_key_path for s in env.sites] + [
        env.platform.admin_token_path,
        env.artifact_store.credentials_path,
    ]
    refs += [a.service_account_token_path for a in env.app_instances] + [h.ssh_key_path for h in env.hosts]
    for user in _login_users(env):
        refs += [*user.ssh_authorized_keys, *([user.password.hash_ref] if user.password.hash_ref else [])]
    return sorted(set(refs))


def _login_users(env: Environment) -> list[LoginUser]:
    return [p.login_user for s in env.sites for p in s.profiles if p.login_user is not None]


def _ssh_public_key(comment: str) -> str:
    key = ed25519.Ed25519PrivateKey.generate().public_key()
    return key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode() + " " + comment


def _password_hash() -> str:
    """A SHA-512 crypt hash (what `openssl passwd -6` prints) of a random password nobody knows."""
    proc = subprocess.run(["openssl", "passwd", "-6", "-stdin"], input=secrets.token_hex(16), capture_output=True,
                          text=True, check=True)
    return proc.stdout.strip()


def _ssh_private_key() -> str:
    key = ed25519.Ed25519PrivateKey.generate()
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    ).decode()


def machine_specs(env: Environment, bundle_digest: str = "0" * 64) -> dict[str, dict[str, Any]]:
    """Machine specs as the machines component builds them, without the sites' resources: RoCE
    links from the real allocator over the site's pools, a stand-in bundle of the given digest.
    For tests and benchmarks that drive the lifecycle directly."""
    from components.machines import machine_spec
    from providers.sites.roce import Nic, Pool, allocate

    out: dict[str, dict[str, Any]] = {}
    for site in env.sites:
        pools = [
            Pool(site=p.site, rail=p.rail, subnet=p.subnet, start=p.range.start, end=p.range.end, mtu=p.mtu)
            for p in env.roce_pools_of(site.name)
        ]
        roce = {m.hostname for m in env.roce_machines(site.name)}
        nics = [
            Nic(hostname=m.hostname, interface=iface, rail=rail)
            for m in env.machines
            if m.hostname in roce
            for rail, iface in enumerate(env.sku(m.sku).fabric_interfaces)
        ]
        table = allocate(pools, nics, {}) if nics else {}
        by_host: dict[str, list[Any]] = {}
        for (host, _), e in sorted(table.items(), key=lambda kv: kv[1].rail):  # once, not per machine
            by_host.setdefault(host, []).append(e)
        for m in (m for m in env.machines if m.site == site.name):
            links = [
                {"interface": e.interface, "subnet": e.subnet, "address": e.address, "mtu": e.mtu}
                for e in by_host.get(m.hostname, [])
            ]
            bundle = {
                "ref": f"s3://{env.artifact_store.bucket}/bundles/{site.name}/{bundle_digest}.tar.gz",
                "digest": bundle_digest,
            }
            out[m.hostname] = machine_spec(env, m, bundle, links).model_dump(mode="json", exclude_none=True)
    return out
