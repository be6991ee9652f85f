"""HostConvergence without hosts: the compiled inventory (components/host_roles.py), content hash,
refusal of role-rule violations before ansible runs, provider check/diff, and a real (failing) SSH
run for the unreachable path and the private-data-dir hygiene."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

import providers.host_convergence as hc
import providers.hosts.convergence as core
from clients.ansible import AnsibleWorkerFailed
from clients.vault import VaultError, VaultErrorKind
from components.host_roles import HostRolesInvalid, inventory_hosts, spec_for
from components.settings import HostRolesSettings, StackSettings
from environments import load_environment
from environments.coded import CodedError
from providers.host_convergence import HostConvergenceProvider
from providers.hosts.convergence import (
    ConvergenceFailed,
    HostConvergenceSpec,
    HostOutcome,
    RoleRulesViolated,
    build_inventory,
    converge,
    plan,
)
from providers.hosts.failures import HostFail

DEV = ["dev-control-1", "dev-lab-1", "dev-gpu-1"]
SETTINGS = StackSettings(stack="dev", environment="dev")


def dev_spec(**roles: object) -> HostConvergenceSpec:
    """The dev environment compiled by the component, with `hostRoles` settings `roles`."""
    return spec_for(load_environment("dev"), SETTINGS, HostRolesSettings.model_validate(roles))
SECRET = {"dev/ssh/lab-admin#private_key": "-----BEGIN OPENSSH PRIVATE KEY-----\nc2VjcmV0LWtleS1ib2R5\n"
          "-----END OPENSSH PRIVATE KEY-----\n", "dev/slurm/munge#key": "munge-" + "s3cr3t" * 8}


def test_inventory_groups_are_logical_roles_plus_one_per_ansible_role() -> None:
    inv = build_inventory(dev_spec().hosts)
    hosts, groups = inv["all"]["hosts"], inv["all"]["children"]
    assert list(hosts) == DEV  # hostnames as in the seeds
    assert hosts["dev-gpu-1"]["ansible_host"] == "100.88.227.60"
    assert groups["platform_control"]["hosts"] == {"dev-control-1": {}}
    assert groups["app_control"]["hosts"] == {"dev-lab-1": {}}
    assert groups["worker_compute"]["hosts"] == {"dev-gpu-1": {}}
    assert set(groups["role_observability_agent"]["hosts"]) == set(DEV)
    # dev-gpu-1 runs the GPU lane's runner (worker-compute only, seed 003's exception), no other CI role
    assert set(groups["role_runner"]["hosts"]) == {"dev-control-1", "dev-lab-1", "dev-gpu-1"}
    assert "dev-gpu-1" not in json.dumps({k: v for k, v in groups.items()
                                          if k in ("role_gitlab", "role_control_plane_k3s")})
    assert hosts["dev-lab-1"]["gpuaas_runner_tags"] == ["app-control"]
    assert hosts["dev-gpu-1"]["gpuaas_runner_tags"] == ["worker-compute"]  # the GPU lane's runner


def test_lab_override_replaces_every_real_address() -> None:
    env = load_environment("dev")
    lab = {h: f"10.77.3.{11 + i}" for i, h in enumerate(DEV)}
    inv = build_inventory(inventory_hosts(env, lab))
    assert "100." not in json.dumps([h["ansible_host"] for h in inv["all"]["hosts"].values()])
    with pytest.raises(HostRolesInvalid, match="dev-gpu-9"):
        inventory_hosts(env, {"dev-gpu-9": "10.77.3.99"})


def test_content_hash_tracks_vars_inventory_and_role_files(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    base = plan(dev_spec()).content_hash
    assert plan(dev_spec()).content_hash == base
    assert plan(dev_spec(extra_vars={"x": 1})).content_hash != base
    assert plan(dev_spec(secret_refs={"a": "p#k"})).content_hash != base
    assert plan(dev_spec(address_overrides={"dev-gpu-1": "10.0.0.9"})).content_hash != base
    copy = tmp_path / "ansible"
    shutil.copytree(core.ANSIBLE_DIR, copy)
    monkeypatch.setattr(core, "ANSIBLE_DIR", copy)
    assert plan(dev_spec()).content_hash == base
    (copy / "roles/common/defaults/main.yml").write_text("---\ncommon_packages: []\n")
    assert plan(dev_spec()).content_hash != base


@pytest.fixture
def violating_spec() -> HostConvergenceSpec:
    """dev's compiled inventory with a control-plane role on the GPU worker (as a hand-edited state or a
    buggy component could hand it over: the provider checks the role rules itself)."""
    spec = dev_spec()
    hosts = tuple(h.model_copy(update={"roles": (*h.roles, "control_plane_k3s")}) if h.hostname == "dev-gpu-1" else h
                  for h in spec.hosts)
    return spec.model_copy(update={"hosts": hosts})


def test_role_rule_violation_is_refused_before_ansible_runs(violating_spec: HostConvergenceSpec,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(core, "run_playbook", lambda *a, **k: calls.append("ansible"))

    def reader(ref: str) -> SecretStr:
        calls.append(ref)
        return SecretStr("x")

    with pytest.raises(RoleRulesViolated) as exc:
        converge(violating_spec, reader)
    head, *lines = str(exc.value).splitlines()
    assert head.startswith("HST001 host convergence hosts[dev]: inventory refused before ansible ran; fix: ")
    assert [ln for ln in lines if ln.startswith("  ROLE001 hosts[dev]: hosts[2]") and "control_plane_k3s" in ln]
    assert calls == []  # no secret read, no ansible run
    check = HostConvergenceProvider().check({}, json.loads(violating_spec.model_dump_json()))
    assert len(check.failures) == 1 and "ROLE001" in check.failures[0].reason


def test_the_provider_reads_no_environment_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """The inventory is the input: with every environment loader broken, check/plan still work."""
    import environments.loader as loader

    def refuse(*_a: object, **_k: object) -> None:
        raise AssertionError("the provider read an environment file")

    props = json.loads(dev_spec().model_dump_json())
    monkeypatch.setattr(loader, "load_environment", refuse)
    monkeypatch.setattr(loader, "validate_environment", refuse)
    assert HostConvergenceProvider().check({}, props).failures == []


def test_check_names_a_bad_input_with_the_environment_codes() -> None:
    props = json.loads(dev_spec().model_dump_json())
    props["hosts"][0]["address"] = "not-an-ip"
    failures = HostConvergenceProvider().check({}, props).failures
    assert len(failures) == 1 and failures[0].reason.startswith("ENV004 hosts[dev]: hosts[0].address")


def test_secret_refs_must_be_vault_references() -> None:
    with pytest.raises(ValidationError, match="secret_refs.gpuaas_munge_key"):
        dev_spec(secret_refs={"gpuaas_munge_key": "plain-value"})


def test_provider_diff_runs_only_on_a_changed_hash() -> None:
    p = HostConvergenceProvider()
    news = p.check({}, json.loads(dev_spec().model_dump_json())).inputs
    olds = {**news, "host_reports": {}}
    assert p.diff("x", olds, news).changes is False
    assert p.diff("x", {**olds, "content_hash": "0" * 64}, news).changes is True
    # an address moves: the inventory itself shows the change (an in-place update, not a replace)
    moved = json.loads(dev_spec(address_overrides={"dev-gpu-1": "10.0.0.9"}).model_dump_json())
    d = p.diff("x", olds, p.check(olds, moved).inputs)
    assert d.changes is True and d.replaces == []
    assert hc.DESCRIPTOR.diff(olds, moved, inputs=("hosts",)).updates == ("hosts",)


def test_unreachable_hosts_fail_the_run_named_and_leave_no_private_data(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capfd: pytest.CaptureFixture[str],
) -> None:
    """A real ansible-runner + SSH run against loopback addresses nobody serves for us."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    overrides = {h: f"127.0.0.{10 + i}" for i, h in enumerate(DEV)}
    spec = dev_spec(address_overrides=overrides, secret_refs={"gpuaas_munge_key": "dev/slurm/munge#key"})
    spec = spec.model_copy(update={"timeout_s": 120})
    with pytest.raises(ConvergenceFailed) as exc:
        converge(spec, lambda ref: SecretStr(SECRET[ref]))
    msg = str(exc.value)
    assert msg.startswith("HST003 host convergence hosts[dev]: failed on ")
    assert exc.value.code is HostFail.CONVERGENCE_FAILED
    for h in DEV:
        assert exc.value.result.hosts[h].outcome is HostOutcome.UNREACHABLE
        assert f"{h} (unreachable)" in msg
    assert list(tmp_path.iterdir()) == []  # the 0700 private data dir (key, extravars) is gone
    out = capfd.readouterr()
    for value in SECRET.values():
        assert value.splitlines()[1 if "\n" in value else 0] not in msg + out.out + out.err


def test_preview_diff_runs_check_mode_through_vault_even_with_an_unknown_provider(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """diff() with preview_check: secrets via clients.vault from a real OpenBao, a real --check run
    (hosts unreachable here), reported not raised; `__provider` may arrive unknown in a preview."""
    from clients.vault import VaultAuthMethod
    from providers.common import VaultInputs
    from providers.kind import UNKNOWN
    from simulators.openbao import OpenBaoDevServer

    with OpenBaoDevServer() as bao:
        bao.ensure_kv_mount("gpuaas")
        bao.put_secret("gpuaas", "dev/ssh/lab-admin", {"private_key": SECRET["dev/ssh/lab-admin#private_key"]})
        overrides = {h: f"127.0.0.{20 + i}" for i, h in enumerate(DEV)}
        spec = dev_spec(address_overrides=overrides, preview_check=True).model_copy(update={
            "vault": VaultInputs(address=bao.address, auth_method=VaultAuthMethod.TOKEN), "timeout_s": 120})
        p = HostConvergenceProvider()
        p.configure(type("Req", (), {"config": {"gpuaas-infra:vault_token": bao.root_token}})())
        olds0 = json.loads(spec.model_dump_json())
        news = {**p.check(olds0, json.loads(spec.model_dump_json())).inputs, "__provider": UNKNOWN}
        olds = {**news, "content_hash": "0" * 64, "__provider": "x"}
        assert p.diff("id", olds, news).changes is True
    err = capfd.readouterr().err
    assert "[host-convergence preview] hosts that would change: none; check run failed on: " \
           "dev-control-1 (unreachable), dev-gpu-1 (unreachable), dev-lab-1 (unreachable)" in err
    assert "c2VjcmV0LWtleS1ib2R5" not in err


def test_component_spec_comes_from_the_environment_and_the_hostroles_config() -> None:
    sha = "a" * 64
    spec = dev_spec(artifacts={"k3s": {"url": "https://artifacts.example/k3s", "sha256": sha}},
                    secret_refs={"gpuaas_munge_key": "dev/slurm/munge#key"}, preview_check=True)
    assert spec.environment == "dev" and spec.preview_check
    assert spec.vault is not None and spec.vault.address == "https://vault.dev.gpuaas.internal:8200"
    assert spec.artifacts["k3s"].sha256 == sha and spec.ssh_key_ref == "dev/ssh/lab-admin#private_key"
    assert [h.hostname for h in spec.hosts] == DEV and str(spec.hosts[2].address) == "100.88.227.60"
    gpu = spec.hosts[2]
    assert gpu.logical_role.value == "worker_compute" and "control_plane_k3s" not in gpu.roles
    with pytest.raises(ValidationError, match="sha256"):
        dev_spec(artifacts={"k3s": {"url": "https://x", "sha256": "not-a-digest"}})


def test_stack_settings_read_hostroles_once() -> None:
    from components.settings import StackConfigInvalid

    s = StackSettings.from_config("dev", {"hostRoles": '{"preview_check": true}', "app_member_parallelism": "8"})
    assert s.host_roles is not None and s.host_roles.preview_check and s.app_member_parallelism == 8
    assert StackSettings.from_config("dev", {}).host_roles is None
    with pytest.raises(StackConfigInvalid, match="hostRoles.*bogus"):
        StackSettings.from_config("dev", {"hostRoles": '{"bogus": 1}'})


def test_the_inventory_carries_each_hosts_weka_mount_units() -> None:
    """dev mounts its training filesystem on worker_compute hosts (seed 000 §2): dev-gpu-1 carries the real
    wekafs unit plus the lab's disclosed stand-in drop-in; the other hosts carry none."""
    hosts = build_inventory(dev_spec().hosts)["all"]["hosts"]
    assert hosts["dev-control-1"]["gpuaas_mounts"] == [] and hosts["dev-lab-1"]["gpuaas_mounts"] == []
    (mount,) = hosts["dev-gpu-1"]["gpuaas_mounts"]
    assert mount["name"] == "mnt-weka-training.mount"
    assert "Type=wekafs" in mount["unit"] and "What=weka-lab-1.dev.gpuaas.internal/training" in mount["unit"]
    assert "Type=tmpfs" in mount["drop_in"] and "lab stand-in" in mount["drop_in"]
    # the inventory is part of the content hash: a changed mount reruns the playbook
    spec = dev_spec()
    hosts_no_mount = tuple(h.model_copy(update={"mounts": ()}) for h in spec.hosts)
    assert plan(spec).content_hash != plan(spec.model_copy(update={"hosts": hosts_no_mount})).content_hash


def test_a_host_that_is_a_machine_is_converged_again_when_it_is_reimaged_or_replaced() -> None:
    """Issue 28: the identity of the MAAS machine a host is (system_id, deploy fingerprint) is part of what
    convergence keys on: a reimage (another deploy fingerprint) or a new MAAS machine (another system_id)
    changes the content hash, so `up` converges the fresh host; the same machine again changes nothing."""
    p = HostConvergenceProvider()
    machine = {"dev-gpu-1": {"system_id": "abc123", "deploy_fingerprint": "f" * 16}}
    first = json.loads(dev_spec().model_dump_json()) | {"machines": machine}
    news = p.check({}, first).inputs
    olds = {**news, "host_reports": {}}
    assert news["content_hash"] != p.check({}, json.loads(dev_spec().model_dump_json())).inputs["content_hash"]
    assert p.diff("x", olds, p.check(olds, first).inputs).changes is False
    for changed in ({"system_id": "abc123", "deploy_fingerprint": "e" * 16},   # reimaged with another deploy spec
                    {"system_id": "zz9999", "deploy_fingerprint": "f" * 16}):  # replaced by another MAAS machine
        again = p.check(olds, first | {"machines": {"dev-gpu-1": changed}}).inputs
        d = p.diff("x", olds, again)
        assert d.changes is True and d.replaces == [] and again["content_hash"] != news["content_hash"]
    bad = p.check({}, first | {"machines": {"dev-gpu-9": machine["dev-gpu-1"]}})
    assert [f.property for f in bad.failures] == ["machines"] and "dev-gpu-9" in bad.failures[0].reason
    assert bad.failures[0].reason.startswith("HST002 host convergence hosts[dev]: machines names hosts not in ")


def test_an_unreadable_secret_stops_the_run_before_ansible_with_its_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Vault failure (here: the path is missing) is HST004 naming the path and Vault's own advice; nothing ran
    on a host, and no secret value read before it appears in the error."""
    calls: list[str] = []
    monkeypatch.setattr(core, "run_playbook", lambda *a, **k: calls.append("ansible"))
    spec = dev_spec(secret_refs={"gpuaas_munge_key": "dev/slurm/munge#key"})

    def reader(ref: str) -> SecretStr:
        if ref == spec.ssh_key_ref:
            raise VaultError(VaultErrorKind.PATH_MISSING, "http://vault:8200", f"mount 'gpuaas' path {ref!r}")
        return SecretStr(SECRET[ref])

    with pytest.raises(CodedError) as exc:
        converge(spec, reader)
    msg = str(exc.value)
    assert exc.value.code is HostFail.VAULT and msg.startswith("HST004 host convergence hosts[dev]: Vault path missing")
    assert spec.ssh_key_ref in msg and "; fix: write the secret there" in msg
    assert SECRET["dev/slurm/munge#key"] not in msg and calls == []


def test_a_worker_that_cannot_run_the_playbook_fails_with_its_code(monkeypatch: pytest.MonkeyPatch) -> None:
    def crashed(*_a: object, **_k: object) -> None:
        raise AnsibleWorkerFailed("the ansible worker exited -9 without a result")

    monkeypatch.setattr(core, "run_playbook", crashed)
    with pytest.raises(CodedError) as exc:
        converge(dev_spec(), lambda ref: SecretStr(SECRET[ref]))
    assert str(exc.value) == ("HST006 host convergence hosts[dev]: the ansible worker exited -9 without a result; "
                              f"fix: {HostFail.ANSIBLE_WORKER.fix}")
    assert isinstance(exc.value.source, AnsibleWorkerFailed)


def test_a_provider_given_no_vault_settings_fails_with_its_code() -> None:
    props = json.loads(dev_spec().model_dump_json()) | {"vault": None}
    with pytest.raises(CodedError, match=r"^HST005 host convergence hosts\[dev\]: .*; fix: declare the environment"):
        HostConvergenceProvider().create(props)
