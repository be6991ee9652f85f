"""`gpuaas-infra secrets`: the checklist comes from the environment model, one entry per Vault
reference, with its shape and readers; the template is YAML with every value empty."""

from __future__ import annotations

import json

import pytest
import yaml
from pydantic import SecretStr

from cli.main import COMMANDS, main
from cli.secrets import Phase, Shape, secret_checklist, shape_problem
from environments import Environment, declared_environments, load_environment


def model_refs(env: Environment) -> set[str]:
    refs = {s.maas_api_key_path for s in env.sites} | {env.platform.admin_token_path}
    refs |= {env.artifact_store.credentials_path} | {a.service_account_token_path for a in env.app_instances}
    refs |= {h.ssh_key_path for h in env.hosts} | {m.power_user_path for m in env.machines if m.power_user_path}
    users = [p.login_user for s in env.sites for p in s.profiles if p.login_user is not None]
    refs |= {r for u in users for r in u.ssh_authorized_keys}
    refs |= {u.password.hash_ref for u in users if u.password.hash_ref}
    return refs


def test_the_login_users_keys_and_hash_have_their_shapes() -> None:
    entries = {e.ref: e for e in secret_checklist(load_environment("prod"))}
    key = entries["prod/ssh/hpcadmin#public_key"]
    assert key.shape is Shape.SSH_PUBLIC_KEY and key.field.endswith("login_user.ssh_authorized_keys")
    assert shape_problem(Shape.SSH_PUBLIC_KEY, SecretStr("ssh-ed25519 AAAAC3Nz hpcadmin")) is None
    assert shape_problem(Shape.SSH_PUBLIC_KEY, SecretStr("-----BEGIN OPENSSH PRIVATE KEY-----")) is not None
    assert shape_problem(Shape.PASSWORD_HASH, SecretStr("hunter2")) is not None
    assert shape_problem(Shape.PASSWORD_HASH, SecretStr("$6$salt$" + "x" * 40)) is None


@pytest.mark.parametrize("name", declared_environments())
def test_the_checklist_names_every_reference_of_the_environment_once(name: str) -> None:
    env = load_environment(name)
    entries = secret_checklist(env)
    assert [e.ref for e in entries] == sorted({e.ref for e in entries}, key=lambda r: tuple(r.split("#")))
    assert {e.ref for e in entries} == model_refs(env)
    assert all(e.readers and all(r.phases for r in e.readers) for e in entries)


def test_shapes_and_readers_of_the_local_environment() -> None:
    env = load_environment("local")
    by_ref = {e.ref: e for e in secret_checklist(env)}
    maas = by_ref["local/maas/local#api_key"]
    assert maas.shape is Shape.MAAS_API_KEY and maas.field == "sites[local].maas_api_key_path"
    assert {r.kind for r in maas.readers} == {"SiteProfile", "RoceAssignment", "MaasMachine/MachinePool"}
    assert Phase.REFRESH in maas.readers[0].phases
    assert by_ref["local/s3/bundle-publisher#credentials"].shape is Shape.S3_KEYS
    assert by_ref["local/platform/sa-proj-lab#token"].readers[0].kind == "AppInstance"
    ssh = by_ref["local/ssh/lab-admin#private_key"]
    assert ssh.shape is Shape.PEM_PRIVATE_KEY and len(ssh.readers) == 1  # three hosts, one reader line
    assert ssh.readers[0].of == "host local-control-1, host local-lab-1, host local-gpu-1"


def test_power_credentials_are_listed_as_json_user_password() -> None:
    env = load_environment("local")
    machine = env.machines[0].model_copy(update={"power_user_path": "local/bmc/gpu-1#ipmi"})
    env = env.model_copy(update={"machines": (machine, *env.machines[1:])})
    entry = next(e for e in secret_checklist(env) if e.ref == "local/bmc/gpu-1#ipmi")
    assert entry.shape is Shape.USER_PASSWORD and entry.readers[0].of == f"machine {machine.hostname}"


def test_one_reference_used_with_two_shapes_is_refused_naming_both_fields() -> None:
    env = load_environment("local")
    hosts = tuple(h.model_copy(update={"ssh_key_path": env.platform.admin_token_path}) for h in env.hosts)
    with pytest.raises(ValueError) as err:
        secret_checklist(env.model_copy(update={"hosts": hosts}))
    assert "platform.admin_token_path" in str(err.value) and "ssh_key_path" in str(err.value)


@pytest.mark.parametrize(
    ("shape", "value", "problem"),
    [
        (Shape.MAAS_API_KEY, "a:b:c", None),
        (Shape.MAAS_API_KEY, "just-a-token", "3 ':'-separated parts"),
        (Shape.BEARER_TOKEN, "  ", "empty"),
        (Shape.S3_KEYS, json.dumps({"access_key_id": "a", "secret_access_key": "b"}), None),
        (Shape.S3_KEYS, json.dumps({"access_key_id": "a"}), "secret_access_key"),
        (Shape.S3_KEYS, "not json", "not a JSON object"),
        (Shape.USER_PASSWORD, json.dumps({"user": "root", "password": ""}), "password"),
        (Shape.PEM_PRIVATE_KEY, "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----", None),
        (Shape.PEM_PRIVATE_KEY, "ssh-ed25519 AAAA public", "not a PEM private key"),
    ],
)
def test_shape_problems_name_the_rule_never_the_value(shape: Shape, value: str, problem: str | None) -> None:
    found = shape_problem(shape, SecretStr(value))
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found
        assert value.strip() == "" or value not in found


def test_the_command_prints_the_checklist_and_a_yaml_template(capsys: pytest.CaptureFixture[str]) -> None:
    assert {"secrets", "doctor"} <= set(COMMANDS)
    assert main(["secrets", "local"]) == 0
    table = capsys.readouterr().out
    assert "local/maas/local#api_key" in table and "read by: AppInstance" in table
    assert main(["secrets", "local", "--template"]) == 0
    doc = yaml.safe_load(capsys.readouterr().out)
    assert doc["mount"] == "gpuaas"
    assert doc["secrets"]["local/s3/bundle-publisher"] == {
        "credentials": {"access_key_id": "", "secret_access_key": ""}
    }
    assert doc["secrets"]["local/maas/local"] == {"api_key": ""}
    filled = {f"{p}#{k}" for p, keys in doc["secrets"].items() for k in keys}
    assert filled == model_refs(load_environment("local"))


def test_an_unknown_environment_is_exit_2_with_a_fix(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["secrets", "no-such-env"]) == 2
    assert "fix:" in capsys.readouterr().err


def test_the_dev_checklist_includes_its_stacks_host_role_secrets(capsys) -> None:  # noqa: ANN001
    """The host roles' secrets live in stack config (hostRoles.secret_refs), not the environment: the
    checklist (and so doctor and the fill-in template) lists them too, as HostConvergence reads them."""
    from cli.secrets import secrets_main

    assert secrets_main(["dev", "--template"]) == 0
    template = capsys.readouterr().out
    for ref_path in ("dev/slurm/munge", "dev/ci/runner", "dev/gitlab/root"):
        assert ref_path in template, template
    env = load_environment("dev")
    by_ref = {e.ref: e for e in secret_checklist(env, {"gpuaas_munge_key": "dev/slurm/munge#key"})}
    entry = by_ref["dev/slurm/munge#key"]
    assert entry.shape is Shape.STRING and entry.readers[0].kind == "HostConvergence"
    assert entry.field == "gpuaas-infra:hostRoles.secret_refs.gpuaas_munge_key"
