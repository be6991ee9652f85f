# size: the code catalogue, one entry (what, fix hint) per finding code; splitting it would split the one list
"""Validation findings: one stable code per rule, the document and path, and a fix hint.

Every rule of the environment model reports through `Finding`; codes live in `CATALOGUE` only,
so a code is never reused for a different rule (a test checks uniqueness and that every code used
by the rules is catalogued).
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from .coded import block


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
    GITLAB_ON_SEVERAL_HOSTS = "ROLE006"
    RUNNERS_WITHOUT_GITLAB = "ROLE007"
    # Policy combinations
    ROCE_NEEDS_ROCE_FABRIC = "POL001"
    RETRY_ATTEMPTS_UNUSED = "POL002"
    HANDOFF_SITE_ERASES = "POL003"
    TLS_OFF_IN_PROD = "POL004"
    EMBEDDED_IN_REAL_TIER = "POL005"
    SECRET_IN_VALUES = "POL006"
    HW_SYNC_INTERVAL_DIFFERS = "POL007"
    INVALID_TAG = "NAME003"
    UNKNOWN_SERIES = "ENV010"
    # Private CAs
    CA_BUNDLE_MISSING = "TLS001"
    CA_BUNDLE_INVALID = "TLS002"
    CA_BUNDLE_HAS_KEY = "TLS003"
    CA_BUNDLE_EXPIRED = "TLS004"
    CA_BUNDLE_UNUSED = "TLS005"
    CA_BUNDLE_PLACEHOLDER = "TLS006"
    # App instances (seed 004)
    MEMBER_NODES_EXCEED_COUNT = "APP001"
    UNKNOWN_COMPONENT_KEY = "APP002"
    RUNTIME_PAIR_INVALID = "APP003"
    MEMBER_COUNT_OUT_OF_BOUNDS = "APP004"
    NODE_BOUND_TWICE = "APP005"
    MEMBER_COUNT_NOT_ALLOWED = "APP006"
    COMPONENT_WITHOUT_REQUIRED = "APP007"
    SSH_MATERIAL_IN_APP_INPUT = "APP008"
    UNKNOWN_ENDPOINT = "APP009"
    SECRET_IN_APP_INPUT = "APP010"
    MEMBER_ON_NON_NODE = "APP011"
    # Allocation shapes (seed 000 §6)
    ALLOCATION_SHAPE_INVALID = "ALLOC001"
    CPU_ONLY_NOT_OFFERED = "ALLOC002"
    # UI routes through the platform-owned gateway (seed 000 §4)
    ROUTE_SHARED_COOKIES = "ROUTE001"
    ROUTE_PURE_IFRAME = "ROUTE002"
    LINK_OUT_WITHOUT_REASON = "ROUTE003"
    ROUTE_UNKNOWN_COMPONENT = "ROUTE004"
    # WEKA mounts (seed 000 §2)
    MOUNT_ON_S3 = "MOUNT001"
    UNKNOWN_FILESYSTEM = "MOUNT002"
    MOUNT_WITHOUT_TARGET = "MOUNT003"
    DUPLICATE_MOUNT_POINT = "MOUNT004"
    PATH_NOT_OFFERED = "MOUNT005"
    WEKA_CLIENT_MISSING = "MOUNT006"
    WEKA_CLIENT_SOURCE_NOT_NAMED = "MOUNT007"
    # Stack config (stacks/Pulumi.<stack>.yaml, `gpuaas-infra:*`)
    STACK_CONFIG_INVALID = "STK001"
    PIN_WITHOUT_SHA256 = "STK002"
    PIN_MISSING = "STK003"
    HOST_SECRET_MISSING = "STK004"
    PART_UNKNOWN_SITE = "STK005"
    SITE_STACKS_INVALID = "STK006"
    # Host artifact pins (environments/pins/<env>.yaml: operator data)
    PIN_NOT_FILLED = "PIN001"
    LAB_STANDIN_OUTSIDE_LAB = "PIN002"
    PINS_FILE_INVALID = "PIN003"
    PULUMI_CLI_PIN_VERSION = "PIN004"
    # Storage personality
    STORAGE_DEVICE_MISSING = "STO001"
    # Vendor apt repositories (seed 001)
    UNKNOWN_APT_SOURCE = "APT001"
    APT_KEY_PLACEHOLDER = "APT002"
    APT_SUITE_COMPONENTS = "APT003"
    APT_PACKAGE_TWO_SOURCES = "APT004"
    APT_PACKAGE_NOT_INSTALLED = "APT005"
    # The post-deploy login user (seed 001)
    LOGIN_PASSWORD_HASH_REF = "USER001"
    LOGIN_USER_RESERVED = "USER002"
    LOGIN_USER_UNREACHABLE = "USER003"


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
        "an environment is at most 16 MB (10,000 machines take ~1.5 MB): split it, or write aliased values out",
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
    Code.MEMBER_ON_NON_NODE: (
        "app member placed on a host that is no platform node",
        "drop the host from nodes (the platform allocates a node of its pool for the member), or declare the "
        "host's MAAS machine (hosts[].machine) so it enrolls as a platform node",
    ),
    Code.PIN_NOT_FILLED: (
        "host artifact needed but not pinned yet",
        "download the release, then `gpuaas-infra pin <file> --url <where the hosts fetch it> --name <artifact> "
        "--pins <pins file>`",
    ),
    Code.LAB_STANDIN_OUTSIDE_LAB: (
        "lab stand-in pinned outside the lab",
        "pin the real release (`gpuaas-infra pin`); stand-ins are for local-tier environments (the lab) only",
    ),
    Code.PINS_FILE_INVALID: ("pins file missing or invalid", "fix the file (see environments/pins/README.md)"),
    Code.PULUMI_CLI_PIN_VERSION: (
        "runners' Pulumi CLI pin is not the version the tests build",
        "pin the release tools/pulumi-cli/go.mod names (and its version), or bump go.mod",
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
    Code.GITLAB_ON_SEVERAL_HOSTS: (
        "GitLab declared on more than one host",
        "keep extra_roles: [gitlab] on one platform_control host: a second GitLab would be another instance",
    ),
    Code.RUNNERS_WITHOUT_GITLAB: (
        "runners but no GitLab host",
        "declare extra_roles: [gitlab] on one platform_control host (its runners register there)",
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
    Code.HW_SYNC_INTERVAL_DIFFERS: (
        "profiles of one site declare different hardware sync intervals",
        "give every profile of the site the same hardware_sync_interval: it is MAAS's one region setting",
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
    Code.CA_BUNDLE_PLACEHOLDER: (
        "CA bundle is the repository's placeholder CA",
        "replace the file's certificate with the site CA's own (public, safe to commit; environments/ca/README.md)",
    ),
    Code.WEKA_CLIENT_MISSING: (
        "WEKA filesystem mounted on MAAS machines without a client",
        "declare the filesystem's client: {package: weka-agent, apt_source: <the apt source that provides it>}",
    ),
    Code.WEKA_CLIENT_SOURCE_NOT_NAMED: (
        "the WEKA client's apt source is not named by the machines' profile",
        "add the client's apt_source to the profile's apt_sources (the packages step adds it before mounts)",
    ),
    Code.UNKNOWN_APT_SOURCE: ("unknown apt source", "name one of the environment's apt_sources, or declare it there"),
    Code.APT_KEY_PLACEHOLDER: (
        "apt signing key fingerprint is a placeholder",
        "put the repository signing key's real fingerprint (gpg --show-keys --with-colons <key>) before deploying",
    ),
    Code.APT_SUITE_COMPONENTS: (
        "apt suite and components do not fit",
        "a suite such as `jammy` takes components (`[main]`); a flat repository's suite ends in `/` and takes none",
    ),
    Code.APT_PACKAGE_TWO_SOURCES: (
        "package claimed by two apt sources of one profile",
        "list the package under the one source that provides it",
    ),
    Code.APT_PACKAGE_NOT_INSTALLED: (
        "apt source package not in the profile's bundle",
        "add the package to the bundle's vendor_packages, or drop it from the source's packages",
    ),
    Code.LOGIN_PASSWORD_HASH_REF: (
        "login user password policy inconsistent",
        "with `mode: hash` name the hash's Vault reference in `hash_ref`; with `mode: locked` name none",
    ),
    Code.LOGIN_USER_RESERVED: (
        "login user name reserved",
        "pick another name (root and system users are managed by the image)",
    ),
    Code.LOGIN_USER_UNREACHABLE: (
        "login user cannot log in",
        "give the user SSH keys (ssh_authorized_keys: Vault references) or a password hash",
    ),
    Code.MEMBER_NODES_EXCEED_COUNT: ("more member nodes than members", "raise count or list fewer nodes"),
    Code.UNKNOWN_COMPONENT_KEY: ("unknown component key", "use a component key the app declares in the blueprint"),
    Code.RUNTIME_PAIR_INVALID: ("invalid runtime metadata combination", "use one of the valid combinations listed"),
    Code.NODE_BOUND_TWICE: (
        "node bound by two members",
        "a node serves one member of one instance: bind another node",
    ),
    Code.MEMBER_COUNT_OUT_OF_BOUNDS: ("member count out of bounds", "use a count within the component's bounds"),
    Code.MEMBER_COUNT_NOT_ALLOWED: ("member count not one the app allows", "use one of the counts listed"),
    Code.COMPONENT_WITHOUT_REQUIRED: (
        "component declared without the component it joins after",
        "declare the required component with at least one member (an RKE2 agent needs a server)",
    ),
    Code.SSH_MATERIAL_IN_APP_INPUT: (
        "node SSH material in an app input",
        "remove it: apps never receive node SSH credentials; node changes go through the platform's typed "
        "tasks (seed 000 §1)",
    ),
    Code.UNKNOWN_ENDPOINT: (
        "input names an endpoint no instance publishes",
        "name an instance of the same project and an endpoint its app publishes (blueprint apps.<slug>.publishes)",
    ),
    Code.SECRET_IN_APP_INPUT: (
        "secret-looking app input",
        "app inputs are plain config recorded in state: keep secrets in Vault and let the app fetch them",
    ),
    Code.ALLOCATION_SHAPE_INVALID: (
        "allocation shape invalid",
        "a GPU slice has 1, 2 or 4 GPUs, a whole node 8; a CPU-only allocation has gpu_count: 0",
    ),
    Code.CPU_ONLY_NOT_OFFERED: (
        "CPU-only allocation where the platform offers none",
        "use a 1-GPU slice (allocation: {capacity_shape: gpu_slice, gpu_count: 1}) until the platform offers "
        "CPU-only allocations (seed 000 §6)",
    ),
    Code.ROUTE_SHARED_COOKIES: (
        "UI route asks for shared cookies",
        "drop cookies: shared; the platform owns auth, session and cookies (cookies: platform)",
    ),
    Code.ROUTE_PURE_IFRAME: (
        "UI route asks for a pure iframe",
        "use frame_policy: embed (platform reverse proxy, own subdomain) or link_out with a reason",
    ),
    Code.LINK_OUT_WITHOUT_REASON: (
        "link-out route without a reason",
        "add link_out_fallback: {reason: <why the app cannot be safely embedded>}",
    ),
    Code.ROUTE_UNKNOWN_COMPONENT: ("UI route names a component the instance has not", "name a member component"),
    Code.MOUNT_ON_S3: (
        "training/data mount on the S3 path",
        "mount it via: posix (WEKAFS); S3 is the object path for bundles and SDK clients, not a substitute",
    ),
    Code.UNKNOWN_FILESYSTEM: ("mount of an undeclared filesystem", "declare it under filesystems or fix the name"),
    Code.MOUNT_WITHOUT_TARGET: (
        "mount without roles, pools or machines",
        "say who mounts it: roles, pools or machines",
    ),
    Code.DUPLICATE_MOUNT_POINT: ("two mounts at one mount point", "give each mount its own mount_point"),
    Code.PATH_NOT_OFFERED: ("filesystem does not offer that path", "add the path to the filesystem's paths"),
    Code.STACK_CONFIG_INVALID: (
        "invalid stack config value",
        "fix the value in stacks/Pulumi.<stack>.yaml (keys: components/settings.py CONFIG_KEYS)",
    ),
    Code.PIN_WITHOUT_SHA256: (
        "artifact pin without a sha256",
        "add sha256: <64 lowercase hex digits> (sha256sum of the file the URL serves); a URL alone is never "
        "trusted",
    ),
    Code.PIN_MISSING: (
        "artifact a host role downloads has no pin",
        "add gpuaas-infra:hostRoles.artifacts.<name>: {url: ..., sha256: ...} to the stack file",
    ),
    Code.HOST_SECRET_MISSING: (
        "secret a host role needs has no Vault reference",
        "add gpuaas-infra:hostRoles.secret_refs.<var>: <path>#<key> and fill it in Vault",
    ),
    Code.PART_UNKNOWN_SITE: (
        "stack part names a site the environment does not declare",
        "set gpuaas-infra:part to site:<a site of the environment>, control or all",
    ),
    Code.SITE_STACKS_INVALID: (
        "siteStacks entry the control stack cannot use",
        "list only the environment's sites under gpuaas-infra:siteStacks, in the control stack's file",
    ),
    Code.STORAGE_DEVICE_MISSING: (
        "storage layout names a data device the machine's SKU lacks",
        "use a SKU with those block_devices or a layout whose data_devices the SKU has",
    ),
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
        return block(self.code.value, where, self.message, self.hint, self.level.value)


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
