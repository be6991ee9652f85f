"""A site as real nodes meet it, for tests/node: every service behind https signed by a private CA the test
makes, and a vendor apt repository built and signed here.

`AptRepo` builds small .deb files with `dpkg-deb`, indexes them with `apt-ftparchive` (a `dists/<suite>/<component>`
repository), signs the Release file with a throwaway gpg key (InRelease and Release.gpg) and serves the
directory over plain HTTP on a given address. `TrustedSite` puts the artifact store (moto S3, private bucket),
the platform simulator (enrollment, reports, the node agent package) and the apt repository behind TLS fronts
on a lab network's gateway, each certificate signed by `ca`; the repository's signing key lies in the store
(`apt-keys/<name>.asc`), as an environment's `signing_key.object` says. `user_data` makes what the machine
lifecycle's deploy makes (`handlers._user_data`: presigned URLs, the node's CAs, the login user from "Vault").
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clients.platform import PlatformClient, models
from clients.s3 import ArtifactStore, S3Credentials, S3Location
from providers.machines.node_trust import node_ca_bundle
from providers.machines.records import Context, Goal, LifecycleRecord
from providers.machines.runtime import PlatformEnrollment, bundle_presigner
from providers.machines.spec import AptKeyPin, Deadlines, LifecyclePolicy, LoginUserSpec, MachineSpec
from providers.machines.user_data import deploy_user_data
from providers.sites.bundle import BundleSpec, digest, pack, render_bundle
from providers.sites.bundle_node import AptSourceSpec
from simulators.platform import agent_package
from simulators.s3 import FAKE_ACCESS_KEY_ID, FAKE_SECRET_ACCESS_KEY, MotoS3Server
from simulators.tls import PrivateCa, TlsFront

from .conftest import BUCKET, NODE_TOKEN_TTL_S, machine_spec

SUITE, COMPONENT = "lab", "main"
# LAB STAND-IN of the WEKA client package (the lab has no WEKA cluster and no wekafs kernel module): its agent unit
# and a mount helper for type wekafs that mounts a tmpfs, so a real mount unit (Type=wekafs) mounts on a lab node.
WEKA_CLIENT_STAND_IN = {
    "/lib/systemd/system/weka-agent.service": "# LAB STAND-IN of the WEKA client's agent (tests/node)\n[Unit]\n"
    "Description=WEKA agent (LAB STAND-IN)\n\n[Service]\nExecStart=/bin/sleep infinity\n",
    "/sbin/mount.wekafs": "#!/bin/sh\n# LAB STAND-IN of the WEKA client's mount helper (tests/node): mounts a tmpfs "
    "at the target\nexec mount -t tmpfs -o mode=0755 tmpfs \"$2\"\n",
}


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (stdlib signature)
        pass


class AptRepo:
    """A signed `dists/lab/main` repository of small `Architecture: all` packages, built in `root`."""

    def __init__(self, root: Path, name: str = "lab") -> None:
        self.root, self.name = root, name
        self.pool = root / "pool" / COMPONENT
        self.pool.mkdir(parents=True)
        # gpg's agent socket lives under GNUPGHOME: keep the path short (sun_path is 108 bytes)
        self.gnupg = Path(tempfile.mkdtemp(prefix="gpg-", dir="/tmp"))
        self.gnupg.chmod(0o700)
        self.fingerprint = ""
        self.public_key = b""
        self._httpd: http.server.ThreadingHTTPServer | None = None

    def _gpg(self, *args: str) -> str:
        env = {**os.environ, "GNUPGHOME": str(self.gnupg)}
        return subprocess.run(["gpg", "--batch", "--pinentry-mode", "loopback", "--passphrase", "", *args],
                              check=True, capture_output=True, text=True, env=env).stdout

    def add(self, package: str, version: str = "1.0", files: dict[str, str] | None = None,
            executables: tuple[str, ...] = ()) -> None:
        """A package installing `files` (path -> text), e.g. {"/usr/share/gpuaas-lab/driver": "..."}; the paths in
        `executables` get mode 0755."""
        tree = self.root / "build" / package
        (tree / "DEBIAN").mkdir(parents=True)
        (tree / "DEBIAN/control").write_text(
            f"Package: {package}\nVersion: {version}\nArchitecture: all\nMaintainer: gpuaas-infra tests "
            f"<tests@lab.invalid>\nDescription: LAB STAND-IN vendor package {package} (tests/node)\n")
        for path, text in (files or {f"/usr/share/gpuaas-lab/{package}": f"{package} {version}\n"}).items():
            (tree / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
            (tree / path.lstrip("/")).write_text(text)
            (tree / path.lstrip("/")).chmod(0o755 if path in executables else 0o644)
        deb = self.pool / f"{package}_{version}_all.deb"
        subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(tree), str(deb)], check=True, capture_output=True)

    def sign(self) -> None:
        """Index the pool and sign the Release file with a fresh ed25519 key (its fingerprint and public key kept)."""
        self._gpg("--quick-gen-key", f"gpuaas {self.name} repo (tests) <repo@lab.invalid>", "ed25519", "sign", "never")
        self.fingerprint = next(ln.split(":")[9] for ln in self._gpg("--with-colons", "--list-keys").splitlines()
                                if ln.startswith("fpr:"))
        self.public_key = self._gpg("--armor", "--export", self.fingerprint).encode()
        dist = self.root / "dists" / SUITE
        binary = dist / COMPONENT / "binary-amd64"
        binary.mkdir(parents=True)
        packages = subprocess.run(["apt-ftparchive", "packages", "pool"], cwd=self.root, check=True,
                                  capture_output=True).stdout
        (binary / "Packages").write_bytes(packages)
        opts = [f"-oAPT::FTPArchive::Release::{k}={v}" for k, v in
                (("Suite", SUITE), ("Codename", SUITE), ("Architectures", "amd64"), ("Components", COMPONENT))]
        release = subprocess.run(["apt-ftparchive", *opts, "release", str(dist)], check=True,
                                 capture_output=True).stdout
        (dist / "Release").write_bytes(release)
        self._gpg("--yes", "--local-user", self.fingerprint, "--clearsign", "-o", str(dist / "InRelease"),
                  str(dist / "Release"))
        self._gpg("--yes", "--local-user", self.fingerprint, "--armor", "--detach-sign", "-o",
                  str(dist / "Release.gpg"), str(dist / "Release"))

    def serve(self, host: str) -> str:
        handler = functools.partial(_Quiet, directory=str(self.root))
        self._httpd = http.server.ThreadingHTTPServer((host, 0), handler)
        threading.Thread(target=self._httpd.serve_forever, name="apt-repo", daemon=True).start()
        return f"http://{host}:{self._httpd.server_address[1]}"

    def close(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        subprocess.run(["gpgconf", "--kill", "gpg-agent"], env={**os.environ, "GNUPGHOME": str(self.gnupg)},
                       capture_output=True)
        shutil.rmtree(self.gnupg, ignore_errors=True)


@dataclass
class TrustedSite:
    """The services of a site behind https on the lab gateway (see the module docstring)."""

    ca: PrivateCa
    platform: Any  # tests.fixtures.platform_sim.RunningSim
    admin: PlatformClient
    site_id: str
    profile_id: str
    store: ArtifactStore
    urls: dict[str, str]
    """kind -> https URL of its front: s3, platform, repo."""
    repo: AptRepo
    secrets: dict[str, str] = field(default_factory=dict)
    """A stand-in of Vault for the login user: ref -> value."""

    def apt_source(self, packages: tuple[str, ...], key_object: str = "apt-keys/lab.asc") -> AptSourceSpec:
        return AptSourceSpec(name="lab", url=self.urls["repo"] + "/", suite=SUITE, components=(COMPONENT,),
                             fingerprint=self.repo.fingerprint, key_ref=f"s3://{BUCKET}/{key_object}",
                             packages=packages)

    def publish(self, spec: BundleSpec) -> tuple[str, str, str]:
        """The bundle in the store over https: (s3 ref, digest, the version's path-style URL)."""
        blob = pack(render_bundle(spec))
        d = digest(blob)
        obj = self.store.put(spec.key(d), blob, {"digest": d})
        return f"s3://{BUCKET}/{obj.key}", d, f"{self.urls['s3']}/{BUCKET}/{obj.key}?versionId={obj.version_id}"

    def context(self, node_ca: str | None = None, **policy: Any) -> Context:
        """The lifecycle's context as runtime.build_context makes it: the node's CAs from the CA file."""
        ca = node_ca if node_ca is not None else node_ca_bundle({"ca_bundles.platform": str(self.ca.bundle),
                                                                 "ca_bundles.s3": str(self.ca.bundle)})
        return Context(
            ops=None,  # type: ignore[arg-type]  # set by tests that run the lifecycle against MAAS
            enrollment=PlatformEnrollment(self.admin, self.site_id, self.profile_id),
            policy=LifecyclePolicy(commissioning_scripts=(), batch_max_parallel=2, **policy),
            deadlines=Deadlines().scaled(1e-2), platform_url=self.urls["platform"],
            presign=bundle_presigner(self.store), log=lambda _m: None, node_ca=ca, read_secret=self.secrets.__getitem__,
        )

    def spec(self, hostname: str, system_id: str, bundle: BundleSpec, *, key_object: str = "apt-keys/lab.asc",
             login_user: LoginUserSpec | None = None) -> MachineSpec:
        ref, d, url = self.publish(bundle)
        spec = machine_spec(ref, d, url).model_copy(update={"hostname": hostname})
        keys = (AptKeyPin(source="lab", ref=f"s3://{BUCKET}/{key_object}", fingerprint=self.repo.fingerprint),)
        deploy = spec.deploy.model_copy(update={"apt_keys": keys if bundle.profile.apt_sources else None,
                                                "login_user": login_user,
                                                "mount_sets": tuple(m.name for m in bundle.mounts) or None})
        return spec.model_copy(update={"deploy": deploy})

    def user_data(self, ctx: Context, spec: MachineSpec, system_id: str) -> tuple[str, bytes]:
        """(node id, user_data) of one deploy attempt, made by the lifecycle's own code."""
        grant = self.admin.mint_enrollment_token(self.site_id, models.EnrollmentTokenRequest(
            profile_id=self.profile_id, hostname=spec.hostname, system_id=system_id))
        m = LifecycleRecord(spec=spec, goal=Goal.DEPLOYED, system_id=system_id)
        return grant.node_id, deploy_user_data(ctx, m, grant.node_id, grant.enrollment_token.get_secret_value())


@contextmanager
def trusted_site(tmp: Path, gateway: str, platform: Any, repo_packages: tuple[str, ...]) -> Iterator[TrustedSite]:
    """The platform (already started on `gateway`), a private S3 store, and an apt repository with
    `repo_packages` and a WEKA client stand-in (`weka-agent`), each behind a TLS front on `gateway` signed by a
    fresh CA."""
    (tmp / "ca").mkdir()
    ca = PrivateCa(tmp / "ca")
    cert, key = ca.issue(gateway)
    repo = AptRepo(tmp / "repo")
    for name in repo_packages:
        repo.add(name)
    repo.add("weka-agent", files=WEKA_CLIENT_STAND_IN, executables=("/sbin/mount.wekafs",))
    repo.sign()
    with ExitStack() as stack:
        stack.callback(repo.close)
        s3 = stack.enter_context(MotoS3Server(private=True, host=gateway))
        s3.create_bucket(BUCKET, versioning=True)
        fronts = {kind: stack.enter_context(TlsFront(url, cert, key, host=gateway)) for kind, url in
                  (("s3", s3.endpoint_url), ("platform", platform.url), ("repo", repo.serve(gateway)))}
        urls = {kind: f.url for kind, f in fronts.items()}
        agent = agent_package.build()  # the agent package too: downloaded over https from the platform's front
        platform.offer_agent_package(models.NodeAgentPackage(
            url=f"{urls['platform']}{agent_package.ROUTE}/{agent.sha256}.tar.gz", sha256=agent.sha256,
            version=agent.version))
        store = ArtifactStore(S3Location(endpoint_url=urls["s3"], bucket=BUCKET, ca_bundle=str(ca.bundle)),
                              S3Credentials(access_key_id=FAKE_ACCESS_KEY_ID, secret_access_key=FAKE_SECRET_ACCESS_KEY))
        store.put("apt-keys/lab.asc", repo.public_key, {})
        admin = stack.enter_context(PlatformClient(urls["platform"], platform.creds.platform_admin,
                                                   ca_bundle=str(ca.bundle)))
        site = admin.create_site(models.MaasSiteCreate(
            name="lab", maas_url="http://127.0.0.1:9/MAAS",
            credential_ref=models.VaultCredentialRef(path="lab/maas")))
        profile = admin.create_profile(site.site_id, models.SiteProfileCreate(
            name="h200", policy=models.SiteProfilePolicy(enrollment_token_ttl_seconds=NODE_TOKEN_TTL_S)))
        yield TrustedSite(ca=ca, platform=platform, admin=admin, site_id=site.site_id, profile_id=profile.profile_id,
                          store=store, urls=urls, repo=repo)
