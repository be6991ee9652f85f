"""bootstrap_bundle: the Pulumi adapter of the kind (its spec and reconciler: providers/sites/bundle.py).

This module path and its Provider class are part of the state contract (Pulumi pickles them).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pulumi
from pulumi.dynamic import CheckFailure, CheckResult, ConfigureRequest, Resource

from providers.base import KindProvider
from providers.common import config_get
from providers.kind import KindDescriptor, register
from providers.sites.bundle import (
    SOURCE,
    TEMPLATES_ROOT,
    BundlePublisher,
    BundleSpec,
    TemplateError,
    digest,
    pack,
    render_bundle,
)

DESCRIPTOR = register(KindDescriptor(
    name="BootstrapBundle",
    identity=("name", "site"),  # they name the object key: a new object, not a new version
    in_place=("template_set", "packages", "values", "site_context", "profile", "store", "vault", "mounts", "digest"),
    ignored=("files", "size"),  # derived by check from the rendered files; `digest` covers them
    summary_outputs=("digest", "url"),
    doc="a deterministic, content-addressed bundle published to S3 (same inputs, same digest, no diff)",
    notes={"digest": "a template or value change shows as a new digest: an update publishing a new object"},
))

INPUTS = (*BundleSpec.model_fields, "digest")


class BootstrapBundleProvider(KindProvider[BundleSpec]):
    descriptor = DESCRIPTOR
    spec_model = BundleSpec
    inputs = INPUTS

    def configure(self, req: ConfigureRequest) -> None:
        super().configure(req)
        root = config_get(req.config, "bundle_templates_dir")
        self._root = Path(root) if root else TEMPLATES_ROOT

    def _publisher(self, props: dict[str, Any]) -> BundlePublisher:
        return BundlePublisher(self.spec_of(props), self.credentials, getattr(self, "_root", TEMPLATES_ROOT))

    def source(self, news: dict[str, Any]) -> str:
        return f"{SOURCE}[{news.get('name')}]"

    def check_spec(self, olds: dict[str, Any], news: dict[str, Any], spec: BundleSpec) -> CheckResult:
        try:
            files = render_bundle(spec, getattr(self, "_root", TEMPLATES_ROOT))
        except TemplateError as e:
            return CheckResult(news, [CheckFailure("template_set", f"{SOURCE}[{spec.name}]: {e}")])
        data = pack(files)
        checked = dict(news)
        checked.update(digest=digest(data), size=len(data),
                       files={p: hashlib.sha256(b).hexdigest() for p, b in files.items()})
        return CheckResult(checked, [])

    def converge(self, props: dict[str, Any], olds: dict[str, Any] | None) -> dict[str, Any]:
        # A new digest is a new object; the old one stays (deployed nodes may still fetch it).
        pub = self._publisher(props).converge()
        return pub.model_dump(mode="json", include={"ref", "digest", "size", "url"})

    def id_of(self, props: dict[str, Any], result: Any) -> str:
        return str(result["digest"])

    def observe(self, id_: str, props: dict[str, Any]) -> dict[str, Any] | None:
        ref, dg = props.get("ref"), props.get("digest")
        if not ref or not dg or not self._publisher(props).observe(ref, dg):
            return None  # gone from the store: the next up publishes it again
        return {}  # the outputs as they are

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        if props.get("ref"):
            self._publisher(props).release(props["ref"])


class BootstrapBundle(Resource, module="gpuaas", name="BootstrapBundle"):
    ref: pulumi.Output[dict[str, str]]
    digest: pulumi.Output[str]
    size: pulumi.Output[float]
    url: pulumi.Output[str]
    files: pulumi.Output[dict[str, str]]

    def __init__(self, name: str, spec: BundleSpec, opts: pulumi.ResourceOptions | None = None) -> None:
        outs = {"ref": None, "digest": None, "size": None, "url": None, "files": None}
        # no `mounts` key when the bundle carries none: the inputs of a bundle without mounts stay as they were
        props = spec.model_dump(mode="json", exclude=None if spec.mounts else {"mounts"})
        super().__init__(BootstrapBundleProvider(), name, {**outs, **props}, opts)
