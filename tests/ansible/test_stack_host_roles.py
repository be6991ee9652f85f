"""Host convergence is on in the committed stack files whose environment has hosts: the pins live in the
environment's pins file (operator data, `gpuaas-infra:hostRoles.pins`), Vault references in
`gpuaas-infra:hostRoles`; validation refuses a pin without a sha256, a role whose artifact or secret the
stack does not name, a lab stand-in outside the lab and a runners' Pulumi CLI that is not the tests' version,
with code, file, path and hint. The dev program (a `pulumi preview` by the real CLI) declares HostConvergence
and warns that `up` refuses until its pins are filled."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.host_roles import ROLE_NEEDS, host_roles_findings
from components.settings import StackConfigInvalid, StackSettings
from environments import load_environment
from environments.findings import Code, Level
from environments.pins import LAB_PINS, load_pins, standin_digests
from lab.standins import build_standins
from providers.kind import UNKNOWN
from tests.fixtures.preview import planned
from tests.fixtures.stack_config import committed_config

REPO = Path(__file__).resolve().parents[2]
DEV = ["dev-control-1", "dev-lab-1", "dev-gpu-1"]
# Stacks whose environment declares hosts but whose hostRoles is not committed, with why.
NOT_YET = {
    "local": "the demo's hosts are simulated: nothing to converge",
}


def committed(stack: str) -> dict[str, str]:
    """The stack file's config as the program receives it (strings; hostRoles JSON-encoded, as the CLI does)."""
    return committed_config(stack)


@pytest.mark.parametrize("stack", ["local", "dev", "staging", "prod", "prod-control"])
def test_stacks_with_hosts_turn_convergence_on_with_every_pin_and_secret_ref(stack: str) -> None:
    settings = StackSettings.from_config(stack, committed(stack))
    env = load_environment(settings.environment)
    if settings.host_roles is None:
        assert not env.hosts or stack in NOT_YET, f"{stack}: environment has hosts but hostRoles is not set"
        return
    roles = settings.host_roles
    assert roles.pins == f"environments/pins/{env.name}.yaml" and not roles.artifacts, "pins are operator data"
    pins, bad = load_pins(roles.pins)
    assert bad == [] and pins is not None
    needed = {a for h in env.hosts for r in h.roles for a in ROLE_NEEDS.get(r.value, ((), ()))[0]}
    assert needed <= set(pins.artifacts), "the pins file declares every artifact the hosts' roles fetch"
    # Nothing real can be pinned here: a preview warns (PIN001) for each, and `up` refuses before it mutates.
    found = host_roles_findings(env, settings, preview=True)
    assert {(f.code, f.level) for f in found} <= {(Code.PIN_NOT_FILLED, Level.WARNING)}, found
    assert {f.path.split(".")[1] for f in found} == {n for n in needed if not pins.artifacts[n].pinned}
    assert {f.level for f in host_roles_findings(env, settings)} <= {Level.ERROR}
    assert all(ref.count("#") == 1 and ref.startswith(f"{env.name}/") for ref in roles.secret_refs.values())
    assert not roles.address_overrides and not roles.apt_source, "lab-only settings stay out of committed config"


def test_the_lab_pins_are_the_reproducible_stand_ins(tmp_path: Path) -> None:
    """environments/pins/lab.yaml pins the lab stand-ins, rebuilt byte for byte here (`python -m lab pins`)."""
    pins, _ = load_pins(LAB_PINS)
    assert pins is not None
    built = build_standins(tmp_path)
    assert {k: p.sha256 for k, p in pins.artifacts.items() if p.pinned} == {k: a.sha256 for k, a in built.items()}
    assert all(pins.artifacts[k].url.rsplit("/", 1)[1] == a.name for k, a in built.items())
    assert standin_digests() == {a.sha256 for a in built.values()}


def _with_pins(tmp_path: Path, source: Path, edit: Any) -> str:
    doc = yaml.safe_load(source.read_text())
    edit(doc["artifacts"])
    path = tmp_path / source.name
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_lab_stand_ins_are_refused_outside_the_lab(tmp_path: Path) -> None:
    """dev-control-1 is the pipeline's own CI host: the stand-ins' digests or their path are refused in dev
    (PIN002, file and path named), in the pins file and inline; a local-tier environment (the lab) takes them."""
    config = committed("dev")
    roles = json.loads(config["hostRoles"])
    settings = StackSettings.from_config("dev", {**config, "hostRoles": json.dumps({**roles, "pins": str(LAB_PINS)})})
    found = [f for f in host_roles_findings(load_environment("dev"), settings)
             if f.code is Code.LAB_STANDIN_OUTSIDE_LAB]
    assert {f.path for f in found} == {f"artifacts.{k}" for k in ("k3s", "gitlab", "gitlab_runner", "node_agent",
                                                                  "pulumi_cli")}
    assert all(f.file == "environments/pins/lab.yaml" and f.level is Level.ERROR for f in found)
    standin = sorted(standin_digests())[0]
    inline = {**roles, "artifacts": {"k3s": {"url": "https://mirror.example/k3s", "sha256": standin}}}
    settings = StackSettings.from_config("dev", {**config, "hostRoles": json.dumps(inline)})
    assert Code.LAB_STANDIN_OUTSIDE_LAB in {f.code for f in host_roles_findings(load_environment("dev"), settings)}
    lab = StackSettings.from_config("local", {"hostRoles": json.dumps({"pins": str(LAB_PINS), **{
        "secret_refs": {k: v.replace("dev/", "local/") for k, v in roles["secret_refs"].items()}}})})
    assert Code.LAB_STANDIN_OUTSIDE_LAB not in {f.code for f in host_roles_findings(load_environment("local"), lab)}


def test_the_runners_pulumi_cli_is_the_version_the_tests_build(tmp_path: Path) -> None:
    config = committed("staging")
    roles = json.loads(config["hostRoles"])
    pins = _with_pins(tmp_path, REPO / roles["pins"], lambda a: a["pulumi_cli"].update(version="3.200.0"))
    settings = StackSettings.from_config("staging", {**config, "hostRoles": json.dumps({**roles, "pins": pins})})
    [f] = [f for f in host_roles_findings(load_environment("staging"), settings)
           if f.code is Code.PULUMI_CLI_PIN_VERSION]
    assert f.path == "artifacts.pulumi_cli.version" and "3.200.0" in f.message and "3.274.1" in f.message


def _dev_with(edit: Any) -> dict[str, str]:
    config = committed("dev")
    roles = json.loads(config["hostRoles"])
    edit(roles)
    return {**config, "hostRoles": json.dumps(roles)}


def test_a_pin_without_sha256_is_refused_with_code_file_path_and_hint() -> None:
    with pytest.raises(StackConfigInvalid) as caught:
        StackSettings.from_config("dev", _dev_with(lambda r: r.update(artifacts={"k3s": {"url": "https://m/k3s"}})))
    [f] = caught.value.findings
    assert (f.code, f.file, f.path) == (Code.PIN_WITHOUT_SHA256, "stacks/Pulumi.dev.yaml",
                                        "gpuaas-infra:hostRoles.artifacts.k3s.sha256")
    assert "sha256" in f.hint and "ERROR STK002 stacks/Pulumi.dev.yaml" in str(caught.value)
    with pytest.raises(StackConfigInvalid) as bad_digest:
        StackSettings.from_config("dev", _dev_with(lambda r: r.update(
            artifacts={"node_agent": {"url": "https://m/a", "sha256": "abc"}})))
    assert [f.code for f in bad_digest.value.findings] == [Code.PIN_WITHOUT_SHA256]


def test_a_plain_secret_in_secret_refs_is_refused_without_echoing_it() -> None:
    with pytest.raises(StackConfigInvalid) as caught:
        StackSettings.from_config("dev", _dev_with(lambda r: r["secret_refs"].update(gpuaas_runner_token="glrt-x9")))
    [f] = caught.value.findings
    assert f.code is Code.STACK_CONFIG_INVALID and f.path == "gpuaas-infra:hostRoles.secret_refs"
    assert "glrt-x9" not in str(caught.value)


def test_a_role_without_its_pin_or_secret_ref_is_named_with_its_hosts(tmp_path: Path) -> None:
    pins = _with_pins(tmp_path, REPO / "environments/pins/dev.yaml", lambda a: a.pop("gitlab_runner"))

    def drop(r: dict[str, Any]) -> None:
        del r["secret_refs"]["gpuaas_munge_key"]
        r["pins"] = pins

    settings = StackSettings.from_config("dev", _dev_with(drop))
    found = {f.code: f for f in host_roles_findings(load_environment("dev"), settings)}
    assert {Code.PIN_MISSING, Code.HOST_SECRET_MISSING} <= set(found)
    pin, secret = found[Code.PIN_MISSING], found[Code.HOST_SECRET_MISSING]
    assert pin.path == "gpuaas-infra:hostRoles.artifacts.gitlab_runner" and pin.file == "stacks/Pulumi.dev.yaml"
    assert pin.message == "gitlab_runner is needed by role runner on dev-control-1, dev-lab-1, dev-gpu-1"
    assert "sha256" in pin.hint
    assert secret.message == ("gpuaas_munge_key is needed by role app_control on dev-lab-1; "
                              "role worker_compute on dev-gpu-1")
    assert secret.hint.startswith("under gpuaas-infra:hostRoles.secret_refs add gpuaas_munge_key: <path>#<key>")


def test_the_dev_program_declares_host_convergence_from_committed_config(engine_factory: Any, tmp_path: Path) -> None:
    """A preview of the real program on the dev stack (its committed file, nothing overridden) declares one
    HostConvergence over the three hosts with the committed pins and Vault references."""
    engine = engine_factory(REPO, "dev", backend=tmp_path / "backend")
    preview = engine.preview(timeout=300)
    assert preview.ok, preview.errors()
    step = planned(preview, "gpuaas:HostConvergence::dev-host-roles-convergence")
    assert step["op"] == "create"
    inputs = step["newState"]["inputs"]
    stack_file = yaml.safe_load((REPO / "stacks" / "Pulumi.dev.yaml").read_text())["config"]
    assert "artifacts" not in inputs or inputs["artifacts"] == {}, "nothing of dev is pinned yet"
    assert inputs["secret_refs"] == stack_file["gpuaas-infra:hostRoles"]["secret_refs"]
    warned = "\n".join(d.message for d in preview.diagnostics if d.severity == "warning")
    for name in ("k3s", "gitlab", "gitlab_runner", "node_agent", "pulumi_cli"):
        assert f"WARNING PIN001 environments/pins/dev.yaml: artifacts.{name}.sha256" in warned, warned
    assert "`pulumi up` refuses until it is" in warned
    assert [h["hostname"] for h in inputs["hosts"]] == DEV
    assert inputs["ssh_key_ref"] == "dev/ssh/lab-admin#private_key"
    # dev-gpu-1 is also a MAAS machine: convergence waits for its deploy and keys on what it deployed (issue 28)
    assert any(d.endswith("gpuaas:MaasMachine::machine-dev-gpu-1") for d in step["newState"]["dependencies"])
    assert inputs["machines"] == {"dev-gpu-1": UNKNOWN}, "the machine's identity is known once it is deployed"

    bad = _dev_with(lambda r: r.update(artifacts={"k3s": {"url": "https://mirror.example/k3s"}}))
    refused = engine_factory(REPO, "dev", config={"gpuaas-infra:hostRoles": bad["hostRoles"]},
                             backend=tmp_path / "backend-2").preview(timeout=300)
    assert not refused.ok
    text = "\n".join(refused.errors()) + refused.log
    assert "STK002 stacks/Pulumi.dev.yaml: gpuaas-infra:hostRoles.artifacts.k3s.sha256" in text
    assert not [s for s in refused.steps if "HostConvergence" in s.urn]
