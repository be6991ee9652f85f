"""Validation findings: one stable code per rule, the document and path, and a fix hint.

Every rule of the environment model reports through `Finding`; codes live in `CATALOGUE` only,
so a code is never reused for a different rule (a test checks uniqueness and that every code used
by the rules is catalogued).
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict


class Level(StrEnum):
    ERROR = "error"
    WARNING = "warning"


class Code(StrEnum):
    # Documents and schema
    YAML_SYNTAX = "ENV001"
    UNKNOWN_FIELD = "ENV002"
    MISSING_FIELD = "ENV003"
    INVALID_VALUE = "ENV004"
    OUT_OF_RANGE = "ENV005"
    NO_SUCH_DOCUMENT = "ENV006"
    DOCUMENT_TOO_LARGE = "ENV007"
    NOT_UTF8 = "ENV008"
    DUPLICATE_KEY = "ENV009"
    # Names
    DUPLICATE_HOSTNAME = "NAME001"
    DUPLICATE_NAME = "NAME002"
    # Addresses
    DUPLICATE_ADDRESS = "ADDR001"
    DUPLICATE_MAC = "ADDR002"
    ADDRESS_OUTSIDE_NETWORK = "ADDR003"
    # RoCE pools
    ROCE_POOL_OVERLAP = "ROCE001"
    ROCE_RANGE_INVALID = "ROCE002"
    ROCE_POOL_TOO_SMALL = "ROCE003"
    ROCE_RAIL_MISSING = "ROCE004"
    ROCE_POOL_WITHOUT_ROCE_SITE = "ROCE005"
    ROCE_POOL_DUPLICATE = "ROCE006"
    # References
    UNKNOWN_SITE = "REF001"
    UNKNOWN_PROFILE = "REF002"
    UNKNOWN_BUNDLE = "REF003"
    UNKNOWN_SKU = "REF004"
    UNKNOWN_NODE = "REF005"
    UNKNOWN_STORAGE_LAYOUT = "REF006"
    UNKNOWN_MACHINE = "REF007"
    UNKNOWN_POOL = "REF008"
    POOL_MISMATCH = "REF009"
    BUNDLE_SITE_MISMATCH = "REF010"
    # Host roles (seed 003)
    ROLE_ON_WORKER = "ROLE001"
    APP_CONTROL_PLANE_ON_WORKER = "ROLE002"
    RUNNER_TAGS_WITHOUT_RUNNER = "ROLE003"
    NO_PLATFORM_CONTROL = "ROLE004"
    GPU_TAG_OFF_WORKER = "ROLE005"
    # Policy combinations
    ROCE_NEEDS_ROCE_FABRIC = "POL001"
    RETRY_ATTEMPTS_UNUSED = "POL002"
    HANDOFF_SITE_ERASES = "POL003"
    TLS_OFF_IN_PROD = "POL004"
    EMBEDDED_IN_REAL_TIER = "POL005"
    SECRET_IN_VALUES = "POL006"
    INVALID_TAG = "NAME003"
    UNKNOWN_SERIES = "ENV010"
    # Private CAs
    CA_BUNDLE_MISSING = "TLS001"
    CA_BUNDLE_INVALID = "TLS002"
    CA_BUNDLE_HAS_KEY = "TLS003"
    CA_BUNDLE_EXPIRED = "TLS004"
    CA_BUNDLE_UNUSED = "TLS005"
    # App instances (seed 004)
    MEMBER_NODES_EXCEED_COUNT = "APP001"
    UNKNOWN_COMPONENT_KEY = "APP002"
    RUNTIME_PAIR_INVALID = "APP003"
    MEMBER_COUNT_OUT_OF_BOUNDS = "APP004"
    NODE_BOUND_TWICE = "APP005"


# code -> (title, default fix hint)
CATALOGUE: dict[Code, tuple[str, str]] = {
    Code.YAML_SYNTAX: ("document is not valid YAML", "fix the YAML syntax at the line shown"),
    Code.UNKNOWN_FIELD: ("unknown field", "remove the field or fix its spelling (see environments/README.md)"),
    Code.MISSING_FIELD: ("required field missing", "add the field"),
    Code.INVALID_VALUE: ("invalid value", "use a value of the documented type"),
    Code.OUT_OF_RANGE: ("value out of range", "use a value inside the documented range"),
    Code.NO_SUCH_DOCUMENT: ("document not found", "create the file or fix the environment/blueprint name"),
    Code.DOCUMENT_TOO_LARGE: (
        "document too large",
        "an environment is a few KB: split it, or write aliased values out",
    ),
    Code.NOT_UTF8: ("document is not UTF-8", "save the file as UTF-8"),
    Code.DUPLICATE_KEY: ("key written twice in one mapping", "keep one of the two; YAML would keep only the last"),
    Code.DUPLICATE_HOSTNAME: ("hostname used twice", "give every host and machine a unique hostname"),
    Code.DUPLICATE_NAME: ("name used twice", "give each object of this kind a unique name"),
    Code.DUPLICATE_ADDRESS: ("IP address used twice", "give each host, BMC and pool its own address"),
    Code.DUPLICATE_MAC: ("MAC address used twice", "check the PXE MAC against the machine's NIC label"),
    Code.ADDRESS_OUTSIDE_NETWORK: ("address outside its network", "use an address inside the network named"),
    Code.ROCE_POOL_OVERLAP: ("RoCE pools overlap", "give each (site, rail) pool its own subnet"),
    Code.ROCE_RANGE_INVALID: ("RoCE pool range invalid", "make start <= end, both inside the pool's subnet"),
    Code.ROCE_POOL_TOO_SMALL: ("RoCE pool too small", "widen the range or move machines to another site"),
    Code.ROCE_RAIL_MISSING: ("RoCE rail has no pool", "declare one pool per rail of the site's SKUs"),
    Code.ROCE_POOL_WITHOUT_ROCE_SITE: (
        "RoCE pool on a site without a RoCE profile",
        "remove the pool or add a profile with fabric_mode: roce",
    ),
    Code.ROCE_POOL_DUPLICATE: ("two RoCE pools for one site and rail", "keep one pool per (site, rail)"),
    Code.UNKNOWN_SITE: ("unknown site", "use the name of a site declared under sites"),
    Code.UNKNOWN_PROFILE: ("unknown site profile", "use the name of a profile of that site"),
    Code.UNKNOWN_BUNDLE: ("unknown bootstrap bundle", "use the name of a bundle declared under bootstrap_bundles"),
    Code.UNKNOWN_SKU: ("unknown SKU", "use a SKU declared in the blueprint's skus"),
    Code.UNKNOWN_NODE: ("unknown node", "bind members to a declared host or machine hostname"),
    Code.UNKNOWN_STORAGE_LAYOUT: (
        "unknown storage layout profile",
        "use a layout declared in the blueprint's storage_layouts",
    ),
    Code.UNKNOWN_MACHINE: ("unknown MAAS machine", "use the hostname of a machine declared under machines"),
    Code.UNKNOWN_POOL: ("unknown machine pool", "use the name of a pool declared under machine_pools"),
    Code.POOL_MISMATCH: ("machine does not match its pool", "give the machine its pool's site and profile"),
    Code.BUNDLE_SITE_MISMATCH: ("bundle belongs to another site", "reference a bundle of the same site"),
    Code.ROLE_ON_WORKER: (
        "control-plane or CI role on a worker_compute host",
        "move the role to a platform_control or app_control host (seed 003: never mix them with GPU workers); "
        "the one exception is the GPU lane's runner, with runner_tags: [worker-compute] only",
    ),
    Code.APP_CONTROL_PLANE_ON_WORKER: (
        "app control-plane member on a worker_compute host",
        "bind the member to an app_control host (seed 003)",
    ),
    Code.RUNNER_TAGS_WITHOUT_RUNNER: (
        "runner tags on a host without the runner role",
        "add the runner role to the host or remove its runner_tags",
    ),
    Code.NO_PLATFORM_CONTROL: ("no platform_control host", "declare at least one platform_control host"),
    Code.GPU_TAG_OFF_WORKER: (
        "worker-compute runner tag on a host without a GPU",
        "serve worker-compute from the worker_compute host's runner (runner_tags: [worker-compute] only)",
    ),
    Code.ROCE_NEEDS_ROCE_FABRIC: (
        "phase-2 RoCE enabled on a non-RoCE fabric",
        "set fabric_mode: roce or enable_phase2_roce: false",
    ),
    Code.RETRY_ATTEMPTS_UNUSED: (
        "deploy retry attempts set while retry is disabled",
        "enable enable_deploy_retry_on_datasource_failure or drop max_deploy_retry_attempts",
    ),
    Code.HANDOFF_SITE_ERASES: (
        "customer-handoff site erases disks",
        "set release_erase_mode: none on profiles of customer-handoff sites",
    ),
    Code.EMBEDDED_IN_REAL_TIER: (
        "embedded endpoint in a staging or prod environment",
        "name the site's real URL; `embedded` exists only for the local stack",
    ),
    Code.SECRET_IN_VALUES: (
        "secret-looking bundle value",
        "store the secret in Vault and let the node fetch it at enrollment; bundle values are not secret",
    ),
    Code.INVALID_TAG: ("invalid MAAS tag name", "use letters, digits, '-' and '_' only"),
    Code.UNKNOWN_SERIES: ("unknown distro series", "use a series MAAS has images for"),
    Code.TLS_OFF_IN_PROD: ("MAAS TLS verification off in prod", "set tls_verify: true (only non-prod may disable it)"),
    Code.CA_BUNDLE_MISSING: (
        "CA bundle file not found",
        "put the CA's PEM file there (absolute, or relative to the repository root) or fix the path",
    ),
    Code.CA_BUNDLE_INVALID: ("CA bundle is not PEM certificates", "export the CA certificate(s) in PEM form"),
    Code.CA_BUNDLE_HAS_KEY: (
        "CA bundle holds a private key",
        "remove the key from the file (a CA bundle is public: certificates only) and rotate the key if it was shared",
    ),
    Code.CA_BUNDLE_EXPIRED: ("CA certificate expired", "install the CA's renewed certificate"),
    Code.CA_BUNDLE_UNUSED: (
        "CA bundle named for a kind with no https endpoint to verify",
        "drop the entry, or point the endpoints at their https URLs",
    ),
    Code.MEMBER_NODES_EXCEED_COUNT: ("more member nodes than members", "raise count or list fewer nodes"),
    Code.UNKNOWN_COMPONENT_KEY: ("unknown component key", "use a component key the app declares in the blueprint"),
    Code.RUNTIME_PAIR_INVALID: ("invalid runtime metadata combination", "use one of the valid combinations listed"),
    Code.NODE_BOUND_TWICE: (
        "node bound by two members",
        "a node serves one member of one instance: bind another node",
    ),
    Code.MEMBER_COUNT_OUT_OF_BOUNDS: ("member count out of bounds", "use a count within the component's bounds"),
}


class Finding(BaseModel):
    """One validation result. `path` is a dotted path inside `file`, e.g. `sites[0].profiles[1].batch_max_parallel`."""

    model_config = ConfigDict(frozen=True)

    code: Code
    level: Level = Level.ERROR
    file: str
    path: str
    message: str
    hint: str

    def render(self) -> str:
        where = f"{self.file}: {self.path}" if self.path else self.file
        return f"{self.level.value.upper()} {self.code.value} {where}\n    {self.message}\n    fix: {self.hint}"


def finding(
    code: Code, file: str, path: str, message: str, hint: str | None = None, level: Level = Level.ERROR
) -> Finding:
    return Finding(code=code, level=level, file=file, path=path, message=message, hint=hint or CATALOGUE[code][1])


def format_path(loc: tuple[int | str, ...] | list[int | str]) -> str:
    """('sites', 0, 'profiles', 1, 'x') -> 'sites[0].profiles[1].x'."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


class EnvironmentInvalid(Exception):
    """Raised with every finding of an environment at once; carries no traceback-worthy state."""

    def __init__(self, findings: list[Finding]):
        self.findings = findings
        errors = [f for f in findings if f.level is Level.ERROR]
        super().__init__(f"{len(errors)} error(s) in the environment:\n" + "\n".join(f.render() for f in errors))
