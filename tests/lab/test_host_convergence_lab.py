"""The dev stack's HostConvergence on the real three-host lab, in lifecycle order:
preview on fresh hosts -> converge -> second run changes nothing -> each host runs exactly its
roles' services -> an unreachable host fails the run, named. Real SSH, real apt, real Vault.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from lab import LabInfo
from lab.pulumi_cli import cli_version
from providers.hosts.convergence import (
    ConvergenceFailed,
    ConvergenceResult,
    HostConvergenceSpec,
    HostOutcome,
    SecretReader,
    converge,
)
from tests.fixtures.backend import state_text

from .conftest import LAB_HOSTS as DEV_HOSTS
from .conftest import RUNNER_TOKENS, RUNNERS, SECOND_CONTROL, record_phase, site_ca

# One pytest-xdist worker runs this whole file (make test: --dist loadfile): the tests share `_state` and the lab.
pytestmark = [pytest.mark.lab, pytest.mark.slow(seconds=550)]

# Services each host must (and must not) run, by the roles the dev environment gives it.
EXPECTED_ACTIVE = {
    "dev-control-1": {"docker", "prometheus-node-exporter", "prometheus", "k3s", "gitlab-runsvdir",
                      "docker-registry", "gitlab-runner"},
    "dev-lab-1": {"docker", "prometheus-node-exporter", "munge", "slurmctld", "gitlab-runner"},
    # the second control host: k3s (joined to the first), its runners, no GitLab of its own
    "dev-control-2": {"docker", "prometheus-node-exporter", "prometheus", "k3s", "gitlab-runner"},
    # the GPU lane's runner (worker-compute only) sits on the GPU host: seed 003's one exception
    "dev-gpu-1": {"docker", "prometheus-node-exporter", "munge", "slurmd", "gpuaas-node-agent", "gitlab-runner"},
}
ALL_MANAGED = set().union(*EXPECTED_ACTIVE.values())
_state: dict[str, Any] = {}


def _assert_no_secret(text: str, secrets: dict[str, str]) -> None:
    for ref, value in secrets.items():
        for line in value.strip().splitlines()[1:2] or [value]:  # a key's body line, or the whole value
            assert line not in text, f"secret {ref} leaked"


def test_preview_on_fresh_hosts_lists_changes_and_changes_nothing(
    lab: LabInfo, lab_spec: HostConvergenceSpec, lab_reader: SecretReader, capfd: pytest.CaptureFixture[str],
    lab_secrets: dict[str, str],
) -> None:
    t0 = time.monotonic()
    result = converge(lab_spec, lab_reader, check=True)
    record_phase("preview", time.monotonic() - t0)
    assert set(result.hosts) == set(DEV_HOSTS)
    assert all(r.outcome is HostOutcome.CHANGED for r in result.hosts.values()), result.hosts
    would = {(c.host, c.task) for c in result.changes}
    for h in DEV_HOSTS:
        assert (h, "Install the node exporter (Debian package)") in would
        assert (h, "Set journald retention") in would
    assert ("dev-lab-1", "Install the Slurm controller (Debian packages)") in would
    assert ("dev-gpu-1", "Install the node agent service wrapper") in would
    assert ("dev-control-1", "Fetch k3s and verify its checksum") in would
    journald = next(c for c in result.changes if c.task == "Set journald retention")
    assert journald.diff and "+MaxRetentionSec=30day" in journald.diff
    # check mode touched nothing
    for h in DEV_HOSTS:
        assert lab.ssh(h, "test -e /etc/gpuaas/host-role").returncode == 1
    out = capfd.readouterr()
    _assert_no_secret(out.out + out.err + result.model_dump_json(), lab_secrets)


def test_converges_all_three_hosts(
    lab_spec: HostConvergenceSpec, lab_reader: SecretReader, capfd: pytest.CaptureFixture[str],
    lab_secrets: dict[str, str],
) -> None:
    t0 = time.monotonic()
    result = converge(lab_spec, lab_reader)
    record_phase("converge", time.monotonic() - t0)
    _state["first"] = result
    assert {h: r.outcome for h, r in result.hosts.items()} == {h: HostOutcome.CHANGED for h in DEV_HOSTS}
    assert all(r.failed == 0 and r.unreachable == 0 for r in result.hosts.values())
    out = capfd.readouterr()
    assert "[host-convergence] dev-gpu-1: changed: Install the Slurm worker daemon (Debian package)" in out.err
    _assert_no_secret(out.out + out.err + result.model_dump_json(), lab_secrets)


ENGINE_PROJECT = Path(__file__).parent / "engine_project"
FORK_VAR = "GRPC_ENABLE_FORK_SUPPORT"


def _procs() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every process."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            out[int(entry)] = (int(stat.rsplit(")", 1)[1].split()[1]), cmd)
    return out


def _under(root: int, procs: dict[int, tuple[int, str]]) -> set[int]:
    found, todo = set(), [root]
    while todo:
        parent = todo.pop()
        for pid, (ppid, _) in procs.items():
            if ppid == parent and pid not in found:
                found.add(pid)
                todo.append(pid)
    return found


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(x.decode(errors="replace").split("=", 1) for x in raw if b"=" in x)


def test_second_up_through_the_cli_changes_nothing_and_a_preview_lists_a_change(
    engine_factory: Any, lab: LabInfo, lab_spec: HostConvergenceSpec, lab_vault: Any,
    lab_secrets: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The real Pulumi CLI runs the real provider (the plugin `pulumi-resource-pulumi-python`, i.e.
    `python -m pulumi.dynamic`) with nothing set by hand: no GRPC_ENABLE_FORK_SUPPORT anywhere, and
    Ansible runs in a worker process the provider starts (`python -m clients.ansible`), not in the
    provider's gRPC server. up (Vault via clients.vault), then a preview of a changed variable, which
    runs --check --diff and prints what would change."""
    if "first" not in _state:
        pytest.fail("the converge test did not leave its result: it failed or did not run first")
    monkeypatch.delenv(FORK_VAR, raising=False)  # the CLI, hence the plugin, inherits this environment

    def engine_for(spec: HostConvergenceSpec) -> Any:
        cfg = {"gpuaas-infra:hostConvergenceSpec": spec.model_dump_json(),
               "gpuaas-infra:vault_token": lab_vault.root_token}
        return engine_factory(ENGINE_PROJECT, "lab", config=cfg, backend=tmp_path / "backend")

    engine = engine_for(lab_spec)
    t0 = time.monotonic()
    handle = engine.start_up()
    plugins: dict[int, dict[str, str]] = {}  # the provider server's pid -> its environment
    workers: dict[int, int] = {}  # ansible worker pid -> its parent's pid
    playbooks: dict[int, int] = {}  # ansible-playbook pid -> its parent's pid (ansible-runner forked it)
    while handle.popen.poll() is None and time.monotonic() - t0 < 900:
        procs = _procs()
        for pid in _under(handle.pid, procs):
            ppid, cmd = procs[pid]
            try:
                if "-m pulumi.dynamic" in cmd and pid not in plugins:
                    plugins[pid] = _environ(pid)
                elif "-m clients.ansible" in cmd:
                    workers[pid] = ppid
                elif "/ansible-playbook " in cmd and "/ansible-playbook " not in procs.get(ppid, (0, ""))[1]:
                    playbooks.setdefault(pid, ppid)  # the playbook itself, not one of its forks
            except OSError:
                continue  # it ended between the two reads
        time.sleep(0.2)
    up = handle.wait(timeout=60)
    record_phase("second run (CLI up)", time.monotonic() - t0)
    assert up.ok, up.errors() or up.log[-3000:]
    assert up.outputs["changed_total"] == 0, [m for m in up.messages() if ": ok: " not in m][-40:]
    assert {h: r["changed"] for h, r in up.outputs["hosts"].items()} == dict.fromkeys(DEV_HOSTS, 0)
    assert {h: r["outcome"] for h, r in up.outputs["hosts"].items()} == dict.fromkeys(DEV_HOSTS, "ok")
    assert up.outputs["content_hash"] == _state["first"].content_hash
    assert plugins, "never saw the dynamic-provider server (python -m pulumi.dynamic) under the CLI"
    assert all(FORK_VAR not in env for env in plugins.values()), "the provider server has GRPC_ENABLE_FORK_SUPPORT"
    assert workers, "never saw the ansible worker (python -m clients.ansible)"
    assert set(workers.values()) <= set(plugins), "the ansible worker is a child of the provider server"
    assert playbooks and set(playbooks.values()) <= set(workers), "ansible-runner forks in the worker only"

    changed = lab_spec.model_copy(update={"preview_check": True,
                                          "extra_vars": {"common_journald_max_retention": "14day"}})
    t0 = time.monotonic()
    preview = engine_for(changed).preview(timeout=900)
    record_phase("preview of a change", time.monotonic() - t0)
    assert preview.ok, preview.log[-3000:]
    assert [s.op.value for s in preview.steps if "HostConvergence" in s.urn] == ["update"]
    said = "\n".join(preview.messages())  # the provider's stderr, as the CLI's diagnostics
    for h in DEV_HOSTS:
        assert f"[host-convergence preview] {h}: would change: Set journald retention" in said
    assert "+MaxRetentionSec=14day" in said
    assert "hosts that would change: dev-control-1, dev-control-2, dev-gpu-1, dev-lab-1" in said
    assert "MaxRetentionSec=30day" in lab.ssh("dev-gpu-1", "cat /etc/systemd/journald.conf.d/gpuaas.conf").stdout
    _assert_no_secret(state_text(engine) + up.log + preview.log + said, lab_secrets)


def _active(lab: LabInfo, host: str) -> set[str]:
    out = lab.ssh(host, "systemctl is-active " + " ".join(sorted(ALL_MANAGED)) + "; true").stdout.split()
    return {svc for svc, state in zip(sorted(ALL_MANAGED), out, strict=True) if state == "active"}


def test_each_host_runs_exactly_its_roles_services(lab: LabInfo, lab_secrets: dict[str, str]) -> None:
    if "first" not in _state:
        pytest.fail("the converge test did not leave its result: it failed or did not run first")
    assert {h: _active(lab, h) for h in DEV_HOSTS} == EXPECTED_ACTIVE
    for h in DEV_HOSTS:
        marker = lab.ssh(h, "cat /etc/gpuaas/host-role /etc/ansible/facts.d/gpuaas.fact").stdout
        logical = {"dev-control-1": "platform_control", "dev-lab-1": "app_control", "dev-gpu-1": "worker_compute",
                   SECOND_CONTROL: "platform_control"}
        assert marker.splitlines()[0] == logical[h]
        assert lab.ssh(h, "test -d /opt/gpuaas -a -d /var/lib/gpuaas -a -d /var/log/gpuaas -a -d /etc/gpuaas"
                          " -a -f /etc/systemd/journald.conf.d/gpuaas.conf").returncode == 0
    ns = lab.ssh("dev-control-1", "for n in gpuaas-core gpuaas-infra gpuaas-observability;"
                                  " do k3s kubectl get namespace $n; done")
    assert ns.returncode == 0 and ns.stdout.count("Active") == 3
    # issue 28: every runner host has the pinned Pulumi CLI on PATH, the build the tests use
    versions = {h: lab.ssh(h, "sudo -u gpuaas /usr/local/bin/pulumi version").stdout.strip() for h in DEV_HOSTS}
    assert versions == dict.fromkeys(DEV_HOSTS, f"v{cli_version()}"), versions
    # one token per runner: each runner of config.toml carries the Vault value of its own <host>.<tag>
    for host, host_tags in RUNNERS.items():
        config = lab.ssh(host, "cat /etc/gitlab-runner/config.toml").stdout
        for tag in host_tags:
            block = config.split(f'name = "{host}-{tag}"', 1)[1].split("[[runners]]")[0]
            own = f'token = "{lab_secrets[f"{RUNNER_TOKENS}#{host}.{tag}"]}"' in block  # never shown on failure
            assert own, f"{host}/{tag}: the runner does not carry its own token"
    tags = {h: lab.ssh(h, "cat /etc/gpuaas/runner-tags").stdout.split() for h in DEV_HOSTS}
    assert tags == {"dev-control-1": ["platform-control", "sim"], "dev-lab-1": ["app-control"],
                    "dev-gpu-1": ["worker-compute"], SECOND_CONTROL: ["platform-control", "sim"]}, tags


def test_the_weka_mount_unit_is_installed_and_active_on_the_worker(lab: LabInfo) -> None:
    """dev mounts its training filesystem on worker_compute hosts (seed 000 §2): the real wekafs unit, with the
    lab's disclosed tmpfs stand-in as a drop-in, enabled and mounted on dev-gpu-1 only."""
    if "first" not in _state:
        pytest.fail("the converge test did not leave its result: it failed or did not run first")
    unit = "mnt-weka-training.mount"
    state = lab.ssh("dev-gpu-1", f"systemctl is-enabled {unit}; systemctl is-active {unit}; "
                                 "findmnt -n -o FSTYPE /mnt/weka/training").stdout.split()
    assert state == ["enabled", "active", "tmpfs"], state
    shown = lab.ssh("dev-gpu-1", f"systemctl cat {unit}").stdout
    assert "Type=wekafs" in shown and "What=weka-lab-1.dev.gpuaas.internal/training" in shown
    assert "lab stand-in" in shown and "Type=tmpfs" in shown
    for h in ("dev-control-1", "dev-lab-1"):
        assert lab.ssh(h, f"test -e /etc/systemd/system/{unit}").returncode == 1, h


def _poll(fn: Any, deadline_s: float = 60) -> Any:
    end = time.monotonic() + deadline_s
    while True:
        value = fn()
        if value or time.monotonic() > end:
            return value
        time.sleep(0.5)  # poll interval


def test_slurm_controller_and_worker_see_each_other(lab: LabInfo) -> None:
    if "first" not in _state:
        pytest.fail("the converge test did not leave its result: it failed or did not run first")
    def idle() -> str:
        out = lab.ssh("dev-lab-1", "sinfo --noheader --Node --format='%N %t'").stdout
        return out if "dev-gpu-1 idle" in out else ""
    assert _poll(idle), lab.ssh("dev-lab-1", "sinfo; tail -5 /var/log/slurm/slurmctld.log").stdout
    job = lab.ssh("dev-lab-1", "srun -N1 -w dev-gpu-1 hostname", timeout=60)
    assert job.stdout.strip() == "dev-gpu-1", job.stderr


def test_observability_agent_answers_on_every_host(lab: LabInfo) -> None:
    if "first" not in _state:
        pytest.fail("the converge test did not leave its result: it failed or did not run first")
    for h, addr in lab.hosts.items():
        with urllib.request.urlopen(f"http://{addr}:9100/metrics", timeout=10) as r:
            assert b"node_exporter_build_info" in r.read(), h
    prom = f"http://{lab.hosts['dev-control-1']}:9090/api/v1/query?query=up"

    def all_up() -> dict[str, str]:
        try:
            with urllib.request.urlopen(prom, timeout=10) as r:
                res = json.load(r)["data"]["result"]
        except OSError:
            return {}  # Prometheus restarting with the role's configuration
        # job="node" targets carry the role's labels; anything else is a leftover of Debian's default
        ups = {x["metric"]["host"]: x["value"][1] for x in res if "host" in x["metric"]}
        return ups if ups == dict.fromkeys(DEV_HOSTS, "1") else {}
    assert _poll(all_up), "central Prometheus does not see every host's agent up"


def test_the_second_control_host_joins_the_first_k3s_with_the_cluster_token(
    lab: LabInfo, lab_secrets: dict[str, str],
) -> None:
    """Two control hosts, one control plane: dev-control-1 initialised the cluster; dev-control-2's k3s server
    was started with --server https://<dev-control-1>:6443 and the token from Vault, and the first server
    admitted it. The stand-in records its arguments and the token's digest; given another token, the join is
    refused (the first server records the refusal) and the joiner's k3s does not come up."""
    if "first" not in _state:
        pytest.fail("the converge test did not leave its result: it failed or did not run first")
    token = lab_secrets["dev/k3s/cluster#token"]
    first = json.loads(lab.ssh("dev-control-1", "cat /var/lib/rancher/k3s/standin/server-args.json").stdout)
    second = json.loads(lab.ssh(SECOND_CONTROL, "cat /var/lib/rancher/k3s/standin/server-args.json").stdout)
    digest = hashlib.sha256(token.encode()).hexdigest()
    assert first["cluster_init"] and first["server"] is None and first["token_sha256"] == digest
    assert second["server"] == f"https://{lab.hosts['dev-control-1']}:6443" and not second["cluster_init"]
    assert second["token_sha256"] == digest
    assert "--token-file" in second["argv"] and token not in json.dumps(second)
    members = lab.ssh("dev-control-1", "ls /var/lib/rancher/k3s/standin/members").stdout.split()
    assert members == [SECOND_CONTROL]
    assert lab.ssh("dev-control-1", "stat -c %a /etc/rancher/k3s/cluster-token").stdout.strip() == "600"
    # another token: refused, recorded by the first server; the joiner's k3s fails
    swap = "cp /etc/rancher/k3s/cluster-token /root/token.keep && echo K10-not-the-cluster-token >" \
           " /etc/rancher/k3s/cluster-token && systemctl restart k3s; true"
    lab.ssh(SECOND_CONTROL, swap)
    refused = _poll(lambda: lab.ssh("dev-control-1", f"test -e /var/lib/rancher/k3s/standin/refused/{SECOND_CONTROL}"
                                    " && echo refused").stdout.strip())
    lab.ssh(SECOND_CONTROL, "cp /root/token.keep /etc/rancher/k3s/cluster-token && systemctl restart k3s")
    assert refused == "refused", "the first server did not refuse another token"
    assert _poll(lambda: lab.ssh(SECOND_CONTROL, "k3s kubectl get namespace default").returncode == 0)


def _client_cert(ca: tuple[str, str], tmp: Path, name: str) -> tuple[Path, Path]:
    """A client key and a certificate for `name` signed by `ca` (certificate PEM, key PEM)."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    ca_cert, ca_key = x509.load_pem_x509_certificate(ca[0].encode()), serialization.load_pem_private_key(
        ca[1].encode(), password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .sign(ca_key, hashes.SHA256()))  # type: ignore[arg-type]
    cert_file, key_file = tmp / f"{name}.crt", tmp / f"{name}.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


def _upload_status(address: str, ca_file: Path, client: tuple[Path, Path] | None) -> int | str:
    """POST an empty upload to the collector's gpu listener over TLS: the HTTP status, or the TLS failure."""
    import http.client
    import ssl

    ctx = ssl.create_default_context(cafile=str(ca_file))
    ctx.check_hostname = False  # the collector's certificate is checked against the site CA
    if client:
        ctx.load_cert_chain(str(client[0]), str(client[1]))
    conn = http.client.HTTPSConnection(address, 19534, context=ctx, timeout=10)
    try:
        conn.request("POST", "/upload", body=b"", headers={"Content-Type": "application/vnd.fdo.journal"})
        return conn.getresponse().status
    except (ssl.SSLError, OSError) as e:
        return type(e).__name__
    finally:
        conn.close()


def test_journals_ship_over_tls_only_with_a_client_certificate_of_the_site_ca(
    lab: LabInfo, lab_secrets: dict[str, str], tmp_path: Path,
) -> None:
    """Each host's key stays on it, its certificate is the site CA's (signed on the controller with the CA key
    from Vault); a host's journal reaches the collector over TLS; an upload without a client certificate, or
    with one of another CA, is refused."""
    if "first" not in _state:
        pytest.fail("the converge test did not leave its result: it failed or did not run first")
    ca = (lab_secrets["dev/pki/journal#ca_cert"], lab_secrets["dev/pki/journal#ca_key"])
    key_mode = lab.ssh("dev-gpu-1", "stat -c '%U:%G %a' /etc/gpuaas-journal/host.key").stdout.strip()
    assert key_mode == "root:systemd-journal 640", key_mode
    assert lab.ssh("dev-gpu-1", "openssl verify -CAfile /etc/gpuaas-journal/ca.pem /etc/gpuaas-journal/host.crt"
                   ).returncode == 0
    marker = f"gpuaas-journal-{os.urandom(6).hex()}"
    lab.ssh("dev-gpu-1", f"logger -t gpuaas-lab {marker}")
    arrived = _poll(lambda: marker in lab.ssh("dev-control-1", "journalctl -D /var/log/journal/remote/gpu "
                                              "--no-pager -t gpuaas-lab -o cat").stdout, deadline_s=90)
    assert arrived, lab.ssh("dev-gpu-1", "systemctl status systemd-journal-upload --no-pager; journalctl -u "
                            "systemd-journal-upload --no-pager -n 25 -o cat").stdout[-3000:]
    ca_file = tmp_path / "ca.pem"
    ca_file.write_text(ca[0])
    collector = str(lab.hosts["dev-control-1"])
    other = site_ca("another CA")
    refused = _upload_status(collector, ca_file, None)
    assert not isinstance(refused, int), f"an upload without a client certificate got HTTP {refused}"
    intruder = _upload_status(collector, ca_file, _client_cert(other, tmp_path, "intruder"))
    assert not isinstance(intruder, int), f"a client certificate of another CA got HTTP {intruder}"
    admitted = _upload_status(collector, ca_file, _client_cert(ca, tmp_path, "dev-gpu-1"))
    assert isinstance(admitted, int), f"a client certificate of the site CA was refused: {admitted}"


def test_unreachable_host_fails_the_run_naming_it(
    lab: LabInfo, lab_spec: HostConvergenceSpec, lab_reader: SecretReader,
) -> None:
    dead = str(lab.subnet.network_address + 250)  # inside the lab /24, no host there
    hosts = tuple(h.model_copy(update={"address": dead}) if h.hostname == "dev-gpu-1" else h for h in lab_spec.hosts)
    spec = lab_spec.model_copy(update={"hosts": hosts})
    with pytest.raises(ConvergenceFailed) as exc:
        converge(spec, lab_reader, check=True, on_event=None)
    result: ConvergenceResult = exc.value.result
    assert result.hosts["dev-gpu-1"].outcome is HostOutcome.UNREACHABLE
    assert "dev-gpu-1 (unreachable)" in str(exc.value)
    assert "dev-control-1 (" not in str(exc.value) and "dev-lab-1 (" not in str(exc.value)
