"""Host artifacts as site data: the pins file of an environment (`environments/pins/<env>.yaml`).

What the hosts install that is not a Debian package (k3s, the GitLab and GitLab Runner packages, the node
agent, the Pulumi CLI of the runners) is the operator's data, not code: one file per environment, each
artifact `{url, sha256}` (and `version` for the Pulumi CLI), filled with `gpuaas-infra pin` from the file
the operator downloaded (or the URL the hosts fetch it from). A stack names its pins file in
`gpuaas-infra:hostRoles.pins`; doctor fetches every pin and checks its digest.

    artifacts:
      k3s: {url: https://mirror.example/k3s/v1.30.4+k3s1/k3s, sha256: <64 hex>}
      pulumi_cli: {url: https://mirror.example/pulumi-v3.274.1-linux-x64.tar.gz, sha256: ..., version: 3.274.1}

An entry whose `sha256` is empty is declared but not pinned yet: a preview warns (PIN001) and `up` refuses
until it is filled. The lab's stand-ins (lab/standins.py, pinned in `environments/pins/lab.yaml`) are
refused in every environment but a `local`-tier one (PIN002), so they never reach a real CI host.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .documents import read_document
from .findings import Code, Finding, Level, finding, format_path
from .loader import REPO_ROOT

PINS_DIR = REPO_ROOT / "environments" / "pins"
LAB_PINS = PINS_DIR / "lab.yaml"
GO_MOD = REPO_ROOT / "tools" / "pulumi-cli" / "go.mod"
ARTIFACTS = ("k3s", "gitlab", "gitlab_runner", "node_agent", "pulumi_cli")
STANDIN_MARK = "lab-standins/"  # the path the lab serves its stand-ins under (`python -m lab pins`)
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class Pin(BaseModel):
    """One artifact: where the hosts fetch it and the sha256 they verify (empty: not pinned yet)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str = Field(min_length=1)
    sha256: str = ""
    version: str = ""
    """The release it is (required for `pulumi_cli`: the runners' CLI must be the one the tests build)."""

    @field_validator("sha256", mode="before")
    @classmethod
    def _hex(cls, v: object) -> str:
        if isinstance(v, int | float):
            raise ValueError("YAML read the digest as a number: quote it (sha256: \"...\")")
        v = str(v) if v is not None else ""
        v = v.strip()
        if v and not _HEX64.match(v):
            raise ValueError("not 64 lowercase hex digits (sha256sum of the file)")
        return v

    @property
    def pinned(self) -> bool:
        return bool(self.sha256)


class PinsFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    artifacts: dict[str, Pin] = {}

    @field_validator("artifacts")
    @classmethod
    def _known(cls, v: dict[str, Pin]) -> dict[str, Pin]:
        unknown = sorted(set(v) - set(ARTIFACTS))
        if unknown:
            raise ValueError(f"unknown artifact(s) {', '.join(unknown)}; known: {', '.join(ARTIFACTS)}")
        return v


def display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def resolve(path: str | Path) -> Path:
    p = Path(path)
    return p if p.is_absolute() else REPO_ROOT / p


def load_pins(path: str | Path) -> tuple[PinsFile | None, list[Finding]]:
    """The pins file, or the findings that say why it can't be read (PIN003: file, path inside, fix)."""
    p = resolve(path)
    file = display(p)
    if not p.is_file():
        return None, [finding(Code.PINS_FILE_INVALID, file, "(file)", "the pins file does not exist",
                              hint="create it (environments/pins/README.md) or fix gpuaas-infra:hostRoles.pins")]
    doc, found = read_document(p, file)
    if doc is None:
        return None, found
    try:
        return PinsFile.model_validate(doc), []
    except ValidationError as e:
        return None, [finding(Code.PINS_FILE_INVALID, file, format_path(tuple(err["loc"])) or "(top level)",
                              err["msg"]) for err in e.errors(include_url=False)]


def cli_version(go_mod: Path = GO_MOD) -> str | None:
    """The Pulumi CLI version the tests build (tools/pulumi-cli/go.mod's pkg/v3 require), without the v."""
    if not go_mod.is_file():
        return None
    m = re.search(r"^\s*github\.com/pulumi/pulumi/pkg/v3 v(\S+)", go_mod.read_text(), re.M)
    return m.group(1) if m else None


def standin_digests() -> frozenset[str]:
    """The sha256 of every lab stand-in (environments/pins/lab.yaml, which tests keep equal to the build)."""
    pins, _ = load_pins(LAB_PINS)
    return frozenset(p.sha256 for p in (pins.artifacts.values() if pins else ()) if p.pinned)


def pin_findings(pins: PinsFile, file: str, needed: dict[str, str], *, lab_allowed: bool,
                 preview: bool) -> list[Finding]:
    """`needed`: artifact -> who needs it ("role runner on dev-control-1, ..."). PIN001 an artifact needed but
    not pinned (a warning in a preview: the preview shows the plan, `up` refuses), PIN002 a lab stand-in
    outside the lab, PIN004 a Pulumi CLI pin that is not the version the tests build."""
    out: list[Finding] = []
    standins = standin_digests() if not lab_allowed else frozenset()
    for name in sorted(needed):
        pin = pins.artifacts.get(name)
        if pin is None or not pin.pinned:
            out.append(finding(
                Code.PIN_NOT_FILLED, file, f"artifacts.{name}" + ("" if pin is None else ".sha256"),
                f"{name} is needed by {needed[name]} but {'not declared' if pin is None else 'not pinned yet'}"
                + ("; `pulumi up` refuses until it is" if preview else ""),
                hint=f"download the release, then `gpuaas-infra pin <file> --url <where the hosts fetch it> --name "
                     f"{name} --pins {file}` (or `gpuaas-infra pin <url> --name {name} --pins {file}`)",
                level=Level.WARNING if preview else Level.ERROR))
    for name, pin in sorted(pins.artifacts.items()):
        if not lab_allowed and (pin.sha256 in standins or STANDIN_MARK in pin.url):
            out.append(finding(Code.LAB_STANDIN_OUTSIDE_LAB, file, f"artifacts.{name}",
                               f"{name} is pinned to a lab stand-in (lab/standins.py), not the real {name}"))
    cli = pins.artifacts.get("pulumi_cli")
    want = cli_version()
    if cli is not None and want and cli.version.lstrip("v") != want:
        out.append(finding(Code.PULUMI_CLI_PIN_VERSION, file, "artifacts.pulumi_cli.version",
                           f"the runners would get Pulumi CLI {cli.version or '(no version)'}, the tests build {want} "
                           f"({display(GO_MOD)})",
                           hint=f"pin the {want} release (version: {want}) or bump tools/pulumi-cli/go.mod"))
    return out
