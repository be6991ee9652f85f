"""BootstrapBundle: a site bundle rendered from repo templates, packed deterministically, published to S3.

Spec (`BundleSpec`) <- inputs. Pure core: `render_bundle` (jinja2, StrictUndefined) and `pack`
(sorted tar entries, mtime 0, uid/gid 0, empty owner names, fixed modes, gzip header without name
or time), `digest` = sha256 of the packed bytes, key `bundles/<site>/<name>/<digest>.tar.gz`.
Reconciler (`BundlePublisher`): `converge` publishes unless that key already holds bytes of that digest (a
no-op); `observe` checks the pinned version is still there with bytes of its digest (a deleted version or
bytes replaced under the same key and metadata are drift); `release` deletes that version.
Adapter (`BootstrapBundleProvider`, providers/bootstrap_bundle.py): `check` renders, so an undefined
template variable fails there, naming the template and the variable; it also adds `digest`, `size`
and `files` (path -> sha256) to the inputs, so a template change shows in preview as a change of
exactly the bundles it renders.

Templates: `providers/bundle_templates/<template_set>/**/*.j2` (or `gpuaas-infra:bundle_templates_dir`).
Context: `bundle` (name, site, template_set), `site`, `profile` (policy fields), `packages`
(driver/runtime/fabric lists, seed 001), `values` (free-form per-bundle values), `mounts` (the names of
the bundle's WEKA mount sets, seed 000 §2). The mount units themselves are not templates: they are
rendered by providers/hosts/mounts.py under `mounts/<set>/` with their installer (none when no pool
or machine using the bundle mounts anything, so such a bundle's bytes do not change).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import tarfile
from pathlib import Path
from typing import Any

import jinja2
from pydantic import BaseModel, ConfigDict, Field, model_validator

from clients.s3 import ArtifactStore, S3Error, S3ErrorKind, S3Location, StoredObject, s3_credentials
from clients.vault import VaultCredentials
from environments.ca_paths import resolve_ca
from environments.coded import CodedError, raises_coded
from providers.common import VaultInputs, vault_reader
from providers.hosts.mounts import MountSet, bundle_files
from providers.sites.bundle_checks import APPLIED, problems
from providers.sites.bundle_node import AptSourceSpec, LoginUserCheck, node_files
from providers.sites.failures import BUNDLE_CLIENTS, BundleFail
from providers.wire import FabricMode, drop_retired

TEMPLATES_ROOT = Path(__file__).resolve().parents[1] / "bundle_templates"
MANIFEST = "manifest.json"
SOURCE = "bootstrap_bundles"



# --- spec ---------------------------------------------------------------------------------------
class StoreInputs(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    endpoint_url: str
    bucket: str
    region: str = "us-east-1"
    path_style: bool = True
    credentials_path: str
    ca_bundle: str | None = None
    """PEM file of the CA that signs the store's certificate (`ca_bundles.s3`; relative: to the repo)."""

    def location(self) -> S3Location:
        return S3Location(endpoint_url=self.endpoint_url, bucket=self.bucket, region=self.region,
                          path_style=self.path_style, ca_bundle=resolve_ca(self.ca_bundle))


class Packages(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    driver: list[str] = []
    runtime: list[str] = []
    fabric: list[str] = []


class BundleSite(BaseModel):
    """The site fields templates may use."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    bmc_network: str | None = None
    customer_handoff: bool = False


class BundleProfile(BaseModel):
    """The profile fields templates may use. Only these reach the bundle: changing another policy field
    (batch_max_parallel, ...) must not change the digest (which redeploys machines)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fabric_mode: FabricMode = FabricMode.ETHERNET
    storage_layout_profile: str = "flat"
    require_hw_sync: bool = True
    enable_phase2_roce: bool = False
    data_devices: tuple[str, ...] = ()
    """The storage layout's data devices on the SKU (`/dev/<name>`), in order: the storage step makes
    device i the filesystem labelled share<i>, mounted at /share<i>. Empty: no /shareN."""
    apt_sources: tuple[AptSourceSpec, ...] = ()
    """The profile's vendor apt sources (bundle_node.py: `apt/sources.json`, added by the packages step)."""
    login_user: LoginUserCheck | None = None
    """The profile's login user as its validation checks it (bundle_node.py: `validation/05-login-user.sh`)."""

    @model_validator(mode="before")
    @classmethod
    def _retired_fields(cls, data: Any) -> Any:
        return drop_retired(data)


class BundleSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")  # ignore check-added and output keys

    name: str = Field(pattern=r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
    site: str
    template_set: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    packages: Packages = Packages()
    values: dict[str, str | int | bool | float] = {}
    site_context: BundleSite
    profile: BundleProfile = BundleProfile()
    store: StoreInputs
    vault: VaultInputs
    mounts: tuple[MountSet, ...] = ()
    """WEKA mount units per pool / standalone machine that uses this bundle and mounts a filesystem."""

    def context(self) -> dict[str, Any]:
        return {
            "bundle": {"name": self.name, "site": self.site, "template_set": self.template_set},
            "site": self.site_context.model_dump(mode="json"),
            "profile": self.profile.model_dump(mode="json"),
            "packages": self.packages.model_dump(),
            "values": dict(self.values),
            "mounts": sorted(m.name for m in self.mounts),
            # what the cloud-init step applies per part key (bundle_checks.APPLIED: the rest is refused at check)
            "cloud_init": {"applied": dict(APPLIED)},
        }

    def key(self, digest: str) -> str:
        return f"bundles/{self.site}/{self.name}/{digest}.tar.gz"


class TemplateError(CodedError):
    def __init__(self, code: BundleFail, template: str, message: str, hint: str = "") -> None:
        self.template = template
        super().__init__(code, f"template {template}", message, hint)


# --- pure core ------------------------------------------------------------------------------------
def _undefined_name(exc: jinja2.UndefinedError, source_line: str) -> str:
    """The undefined variable as written in the template (`values.mirror_url`), when it can be found."""
    msg = str(exc.message or exc)
    if m := re.match(r"^'([^']+)' is undefined$", msg):
        return m.group(1)
    if m := re.search(r"has no attribute '([^']+)'$", msg):
        attr = m.group(1)
        used = re.search(rf"([A-Za-z_][\w.]*)\.{re.escape(attr)}\b", source_line)
        return f"{used.group(1)}.{attr}" if used else attr
    return msg


def _template_line(exc: BaseException, filename: str) -> int | None:
    tb, line = exc.__traceback__, None
    while tb is not None:  # jinja2 rewrites frames so they point into the template file
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def render_bundle(spec: BundleSpec, root: Path = TEMPLATES_ROOT) -> dict[str, bytes]:
    """Every template of the set rendered: bundle path (without .j2) -> bytes, plus manifest.json."""
    tdir = root / spec.template_set
    if not tdir.is_dir():
        known = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
        raise TemplateError(BundleFail.NO_TEMPLATE_SET, f"{spec.template_set}/",
                            f"template set {spec.template_set!r} does not exist under {root}", f"use one of {known}")
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(tdir)), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, autoescape=False)
    ctx = spec.context()
    files: dict[str, bytes] = {}
    for path in sorted(p for p in tdir.rglob("*.j2") if p.is_file()):
        rel = path.relative_to(tdir).as_posix()
        shown = f"{spec.template_set}/{rel}"
        try:
            text = env.get_template(rel).render(ctx)
        except jinja2.UndefinedError as e:
            line = _template_line(e, str(path))
            src = path.read_text().splitlines()[line - 1].strip() if line else ""
            at = f" at line {line}" if line else ""
            raise TemplateError(BundleFail.UNDEFINED, shown, f"undefined variable {_undefined_name(e, src)!r}{at}",
                                BundleFail.UNDEFINED.fix) from None
        except jinja2.TemplateSyntaxError as e:
            raise TemplateError(BundleFail.SYNTAX, shown, f"syntax error (line {e.lineno}): {e.message}") from None
        files[rel.removesuffix(".j2")] = text.encode()
    bad = problems(spec.template_set, files)
    if bad:
        first, more = bad[0], bad[1:]
        raise TemplateError(BundleFail(first[1]), first.template, first[2] + (
            f" (and {len(more)} more problem(s): " + ", ".join(f"{p[1]} {p.template}" for p in more) + ")"
            if more else ""))
    files.update(bundle_files(spec.mounts))
    files.update(node_files(spec.profile.apt_sources, spec.profile.login_user))
    manifest = {
        "bundle": spec.name, "site": spec.site, "template_set": spec.template_set,
        "files": {p: hashlib.sha256(b).hexdigest() for p, b in sorted(files.items())},
    }
    files[MANIFEST] = (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode()
    return files


def _mode(path: str) -> int:
    return 0o755 if path.endswith(".sh") else 0o644


def pack(files: dict[str, bytes]) -> bytes:
    """Deterministic tar.gz: same files, same bytes (sorted, zeroed times and owners, fixed modes)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for path in sorted(files):
            info = tarfile.TarInfo(path)
            info.size, info.mtime, info.mode = len(files[path]), 0, _mode(path)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(files[path]))
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=9) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


_META = re.compile(r"^#\s*(name|script_type|title|description):\s*(.+?)\s*$", re.MULTILINE)


class Script(BaseModel):
    """A MAAS node script a bundle carries (named by its metadata header)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    script_type: str
    title: str
    description: str
    body: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.body).hexdigest()


def bundle_scripts(data: bytes, folder: str, default_type: str) -> list[Script]:
    """The `<folder>/*.sh` scripts of a packed bundle, named by their MAAS metadata header."""
    out: list[Script] = []
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data))) as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            if not (member.isfile() and member.name.startswith(f"{folder}/") and member.name.endswith(".sh")):
                continue
            body = tar.extractfile(member).read()  # type: ignore[union-attr]
            meta = dict(_META.findall(body.decode(errors="replace")))
            name = meta.get("name") or member.name.rsplit("/", 1)[-1].removesuffix(".sh")
            out.append(Script(name=name, script_type=meta.get("script_type") or default_type,
                              title=meta.get("title") or name, description=meta.get("description") or "", body=body))
    return out


# --- reconciler -----------------------------------------------------------------------------------
class Published(BaseModel):
    ref: dict[str, str]
    digest: str
    size: int
    url: str
    republished: bool


class BundlePublisher:
    def __init__(self, spec: BundleSpec, credentials: VaultCredentials | None, root: Path = TEMPLATES_ROOT):
        self.spec, self._credentials, self.root = spec, credentials, root

    @property
    def where(self) -> str:
        return f"bundle {self.spec.site}/{self.spec.name}"

    def store(self) -> ArtifactStore:
        vault = vault_reader(self.spec.vault, self._credentials)
        s = self.spec.store
        return ArtifactStore(s.location(), s3_credentials(vault, s.credentials_path))

    def build(self) -> tuple[bytes, str]:
        data = pack(render_bundle(self.spec, self.root))
        return data, digest(data)

    @raises_coded(BUNDLE_CLIENTS)
    def converge(self) -> Published:
        """Publish the bundle unless its key already holds that digest (a no-op)."""
        data, dg = self.build()
        store = self.store()
        store.check_bucket()
        key = self.spec.key(dg)
        existing = store.head(key)
        if existing is not None and existing.metadata.get("digest") == dg and self._holds(existing.key,
                                                                                      existing.version_id, dg):
            return self._result(existing, dg, republished=False)  # same digest, same bytes: nothing to do
        meta = {"digest": dg, "site": self.spec.site, "bundle": self.spec.name,
                "template-set": self.spec.template_set}
        return self._result(store.put(key, data, meta), dg, republished=True)

    def _result(self, obj: StoredObject, dg: str, republished: bool) -> Published:
        ref = {"bucket": obj.bucket, "key": obj.key, "version_id": obj.version_id}
        return Published(ref=ref, digest=dg, size=obj.size, url=f"s3://{obj.bucket}/{obj.key}",
                         republished=republished)

    @raises_coded(BUNDLE_CLIENTS)
    def observe(self, ref: dict[str, str], dg: str) -> bool:
        """Is the pinned version (the one nodes fetch) still there, with bytes of that digest? Its metadata
        alone would not say: a deleted version, or bytes replaced under the same key and metadata, are drift
        (refresh drops the resource; the next up publishes it again and the machines redeploy with it)."""
        return self._holds(ref["key"], ref.get("version_id", ""), dg)

    def _holds(self, key: str, version_id: str, dg: str) -> bool:
        try:
            data = self.store().get(key, version_id or None)
        except S3Error as e:
            if e.kind is S3ErrorKind.OBJECT_MISSING:
                return False
            raise
        return digest(data) == dg

    @raises_coded(BUNDLE_CLIENTS)
    def release(self, ref: dict[str, str]) -> None:
        self.store().delete_version(ref["key"], ref["version_id"])
