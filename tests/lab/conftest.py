"""The lab tier: the dev environment's three hosts as systemd-nspawn machines (lab).

Fixtures (session-scoped: one lab per test session, torn down even when tests fail):
  `lab`        -> lab.LabInfo (addresses in the lab's own /24, SSH key, apt source, artifacts)
  `lab_vault`  -> a real OpenBao dev server holding the lab's SSH key, munge key, runner token
  `lab_secrets`-> the secret values themselves (for "never in output" assertions only)
  `lab_spec`   -> providers.host_convergence.HostConvergenceSpec for the dev environment on the lab
When the machine cannot run the lab (not root, packages missing), every lab test is skipped with
the reason, and the terminal summary says so in a banner: never silently.
"""

from __future__ import annotations

import base64
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from clients.vault import VaultAuthMethod, VaultCredentials, VaultReader, VaultSettings
from components.host_roles import spec_for
from components.settings import ArtifactPin, StackSettings
from environments import load_environment
from environments.pins import LAB_PINS, load_pins
from lab import Lab, LabInfo
from providers.common import VaultInputs
from providers.hosts.convergence import HostConvergenceSpec, SecretReader
from simulators.openbao import OpenBaoDevServer
from tests.fixtures.lab_gate import LAB_TIER_WALL, require_lab
from tests.fixtures.stack_config import committed_config

REPO = Path(__file__).resolve().parents[2]

DEV_HOSTS = ["dev-control-1", "dev-lab-1", "dev-gpu-1"]
# A second platform_control host, as prod has (seed 003's dev-control-1 + dev-control-2 expansion): it joins the
# first's k3s; GitLab stays on dev-control-1 (the one host declaring it). Added to dev's compiled inventory here.
SECOND_CONTROL = "dev-control-2"
LAB_HOSTS = [*DEV_HOSTS, SECOND_CONTROL]
RUNNER_TOKENS = "dev/ci/runners"  # the committed hostRoles.runner_tokens_path: one token per runner, key <host>.<tag>
RUNNERS = {"dev-control-1": ["platform-control", "sim"], "dev-lab-1": ["app-control"],
           "dev-gpu-1": ["worker-compute"], SECOND_CONTROL: ["platform-control", "sim"]}
SSH_KEY_REF = "dev/ssh/lab-admin#private_key"  # the dev environment's ssh_key_path
SECRET_REFS = {  # the committed stacks/Pulumi.dev.yaml's hostRoles.secret_refs (lab_spec checks they agree)
    "gpuaas_munge_key": "dev/slurm/munge#key",
    "gpuaas_gitlab_root_password": "dev/gitlab/root#password",
    "gpuaas_k3s_token": "dev/k3s/cluster#token",
    "gpuaas_journal_ca_cert": "dev/pki/journal#ca_cert",
    "gpuaas_journal_ca_key": "dev/pki/journal#ca_key",
}
_REPORT: dict[str, object] = {}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    """The teardown report after the lab went carries its wall time (tests/conftest.py prints it)."""
    report = yield
    if call.when == "teardown" and "finished" in _REPORT and not _REPORT.get("reported"):
        _REPORT["reported"] = True
        wall = float(_REPORT["finished"]) - float(_REPORT["started"])  # type: ignore[arg-type]
        parts = ", ".join(f"{k} {v}s" for k, v in _REPORT.get("phases", {}).items())  # type: ignore[union-attr]
        report.user_properties.append((LAB_TIER_WALL, f"{wall:.1f}s ({parts})"))
    return report


@pytest.fixture(scope="session")
def lab() -> Iterator[LabInfo]:
    require_lab("lab tier")
    _REPORT["started"] = time.monotonic()
    _REPORT["phases"] = {}
    with Lab(LAB_HOSTS) as info:
        _REPORT["phases"]["image+boot"] = round(time.monotonic() - float(_REPORT["started"]), 1)  # type: ignore[index]
        yield info
    _REPORT["finished"] = time.monotonic()


def record_phase(name: str, seconds: float) -> None:
    """Lab tests report their phases (converge, second run ...) into the summary line."""
    _REPORT.setdefault("phases", {})[name] = round(seconds, 1)  # type: ignore[index]


class _Secrets(dict[str, str]):
    """Secret values by Vault ref; repr shows refs only, so a failing test never prints a value."""

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{k!r}: '[secret]'" for k in self) + "}"


@pytest.fixture(scope="session")
def lab_secrets(lab: LabInfo) -> dict[str, str]:
    return _Secrets({
        SSH_KEY_REF: lab.ssh_key_file.read_text(),
        SECRET_REFS["gpuaas_munge_key"]: base64.b64encode(os.urandom(1024)).decode(),
        **{f"{RUNNER_TOKENS}#{host}.{tag}": "glrt-" + secrets.token_urlsafe(20) for host, tags in RUNNERS.items()
           for tag in tags},
        SECRET_REFS["gpuaas_gitlab_root_password"]: secrets.token_urlsafe(24),
        SECRET_REFS["gpuaas_k3s_token"]: "K10" + secrets.token_hex(24),
        **dict(zip((SECRET_REFS["gpuaas_journal_ca_cert"], SECRET_REFS["gpuaas_journal_ca_key"]),
                   site_ca("gpuaas lab site CA"), strict=True)),
    })


def site_ca(name: str) -> tuple[str, str]:
    """(certificate PEM, key PEM) of a CA made here: the site CA that signs the hosts' journal certificates."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM).decode(),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()).decode())


@pytest.fixture(scope="session")
def lab_vault(lab_secrets: dict[str, str]) -> Iterator[OpenBaoDevServer]:
    with OpenBaoDevServer() as bao:
        bao.ensure_kv_mount("gpuaas")
        by_path: dict[str, dict[str, str]] = {}
        for ref, value in lab_secrets.items():
            path, key = ref.split("#")
            by_path.setdefault(path, {})[key] = value
        for path, data in by_path.items():
            bao.put_secret("gpuaas", path, data)
        yield bao


@pytest.fixture(scope="session")
def lab_reader(lab_vault: OpenBaoDevServer) -> SecretReader:
    """clients.vault against the real OpenBao server: what the provider uses in production."""
    reader = VaultReader(VaultSettings(address=lab_vault.address, kv_mount="gpuaas"),
                         VaultCredentials(token=SecretStr(lab_vault.root_token)))
    return reader.read


def committed_stack_config(stack: str) -> dict[str, str]:
    """stacks/Pulumi.<stack>.yaml's config as the program reads it (un-namespaced keys, strings, as the
    Pulumi CLI hands it to the program)."""
    return committed_config(stack, REPO)


@pytest.fixture(scope="session")
def lab_spec(lab: LabInfo, lab_vault: OpenBaoDevServer) -> HostConvergenceSpec:
    """The spec the dev program compiles from its committed stack config (secret refs), on the lab: the lab
    changes host addresses, the apt mirror and Vault, and pins the lab's own artifacts inline: the stand-ins of
    environments/pins/lab.yaml (served by the lab, verified against those committed digests) and the runners'
    Pulumi CLI, the build the tests use (lab/pulumi_cli.py). dev's own pins file holds the real releases."""
    committed = StackSettings.from_config("dev", committed_stack_config("dev"))
    assert committed.host_roles is not None, "stacks/Pulumi.dev.yaml turns host convergence on"
    assert committed.host_roles.secret_refs == SECRET_REFS, "the lab's Vault holds the committed secret refs"
    pins, _ = load_pins(LAB_PINS)
    assert pins is not None
    standins = {k: p.sha256 for k, p in pins.artifacts.items() if p.pinned}
    assert {k: lab.artifacts[k].sha256 for k in standins} == standins, "lab pins differ: see `python -m lab pins`"
    artifacts = {k: ArtifactPin(url=a.url, sha256=a.sha256, version=a.version) for k, a in lab.artifacts.items()}
    on_lab = committed.host_roles.model_copy(update={
        "pins": None, "artifacts": artifacts, "apt_source": lab.apt_source,
        "address_overrides": {h: str(a) for h, a in lab.hosts.items() if h != SECOND_CONTROL},
    })
    spec = spec_for(load_environment("dev"), committed, on_lab)
    first = next(h for h in spec.hosts if h.hostname == "dev-control-1")
    second = first.model_copy(update={"hostname": SECOND_CONTROL, "address": lab.hosts[SECOND_CONTROL],
                                      "roles": tuple(r for r in first.roles if r != "gitlab")})
    vault = VaultInputs(address=lab_vault.address, kv_mount="gpuaas", auth_method=VaultAuthMethod.TOKEN)
    assert committed.host_roles.runner_tokens_path == RUNNER_TOKENS
    tokens = {**spec.runner_token_refs, SECOND_CONTROL: {t: f"{RUNNER_TOKENS}#{SECOND_CONTROL}.{t}"
                                                         for t in RUNNERS[SECOND_CONTROL]}}
    return spec.model_copy(update={"vault": vault, "hosts": (*spec.hosts, second), "runner_token_refs": tokens})
