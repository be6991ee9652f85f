"""Rules about what a node gets beyond its bundle (environments/model_node.py): the vendor apt sources a
profile names, and its login user. Registered in `rules.RULES`."""

from __future__ import annotations

from collections.abc import Iterator

from .findings import Code, Finding, Level, finding
from .model import Blueprint, EnvironmentDocument
from .model_node import PasswordMode

PLACEHOLDER_FINGERPRINT = "0" * 40
RESERVED_USERS = frozenset({"root", "daemon", "bin", "sys", "sync", "nobody", "systemd-network", "sshd", "gpuaas"})


def apt_sources(doc: EnvironmentDocument, bp: Blueprint, file: str) -> Iterator[Finding]:
    placeholders = [(i, a.name) for i, a in enumerate(doc.apt_sources)
                    if a.signing_key.fingerprint == PLACEHOLDER_FINGERPRINT]
    if placeholders:  # said once: an environment waiting for its mirror's key has them all
        yield finding(Code.APT_KEY_PLACEHOLDER, file, f"apt_sources[{placeholders[0][0]}].signing_key.fingerprint",
                      f"apt sources {', '.join(n for _, n in placeholders)}: the signing key fingerprint is all "
                      "zeros: nodes refuse any key", level=Level.WARNING)
    for i, src in enumerate(doc.apt_sources):
        base = f"apt_sources[{i}]"
        flat = src.suite.endswith("/")
        if flat == bool(src.components):
            what = "a flat suite (ending in '/') with components" if flat else f"suite {src.suite!r} without components"
            yield finding(Code.APT_SUITE_COMPONENTS, file, f"{base}.components", f"apt source {src.name}: {what}")
    yield from _profile_sources(doc, file)


def _profile_sources(doc: EnvironmentDocument, file: str) -> Iterator[Finding]:
    known = {a.name: a for a in doc.apt_sources}
    bundles = {b.name: b for b in doc.bootstrap_bundles}
    for si, site in enumerate(doc.sites):
        for pi, p in enumerate(site.profiles):
            base = f"sites[{si}].profiles[{pi}].apt_sources"
            owner: dict[str, str] = {}
            bundle = bundles.get(p.site_bootstrap_bundle_ref)
            vendor = set(bundle.vendor_packages.driver + bundle.vendor_packages.runtime
                         + bundle.vendor_packages.fabric) | _client_packages(doc, site.name, p.name) if bundle else None
            for j, name in enumerate(p.apt_sources):
                src = known.get(name)
                if src is None:
                    yield finding(Code.UNKNOWN_APT_SOURCE, file, f"{base}[{j}]",
                                  f"profile {site.name}/{p.name} names apt source {name!r}; declared: "
                                  f"{', '.join(sorted(known)) or 'none'}")
                    continue
                for pkg in src.packages:
                    if pkg in owner:
                        yield finding(Code.APT_PACKAGE_TWO_SOURCES, file, f"{base}[{j}]",
                                      f"package {pkg} is listed by apt sources {owner[pkg]} and {name} of profile "
                                      f"{site.name}/{p.name}")
                    owner.setdefault(pkg, name)
                    if vendor is not None and pkg not in vendor:
                        yield finding(Code.APT_PACKAGE_NOT_INSTALLED, file, f"{base}[{j}]",
                                      f"apt source {name} provides {pkg}, which bundle {bundle.name if bundle else '?'}"
                                      f" of profile {site.name}/{p.name} does not install", level=Level.WARNING)


def login_users(doc: EnvironmentDocument, bp: Blueprint, file: str) -> Iterator[Finding]:
    for si, site in enumerate(doc.sites):
        for pi, p in enumerate(site.profiles):
            user = p.login_user
            if user is None:
                continue
            base = f"sites[{si}].profiles[{pi}].login_user"
            pw = user.password
            if (pw.mode is PasswordMode.HASH) != (pw.hash_ref is not None):
                yield finding(Code.LOGIN_PASSWORD_HASH_REF, file, f"{base}.password",
                              f"login user {user.name}: password mode {pw.mode.value} "
                              + ("needs hash_ref" if pw.hash_ref is None else "takes no hash_ref"))
            elif pw.expire and pw.mode is PasswordMode.LOCKED:
                yield finding(Code.LOGIN_PASSWORD_HASH_REF, file, f"{base}.password.expire",
                              f"login user {user.name}: a locked password cannot expire")
            if user.name in RESERVED_USERS:
                yield finding(Code.LOGIN_USER_RESERVED, file, f"{base}.name",
                              f"login user {user.name!r} is reserved ({', '.join(sorted(RESERVED_USERS))})")
            if not user.ssh_authorized_keys and pw.mode is PasswordMode.LOCKED:
                yield finding(Code.LOGIN_USER_UNREACHABLE, file, f"{base}.ssh_authorized_keys",
                              f"login user {user.name} has no SSH key and a locked password: nobody can log in as it",
                              level=Level.WARNING)


def _mounted_by(doc: EnvironmentDocument, site: str, profile: str) -> set[str]:
    """The filesystems the machines of (site, profile) mount, through their pool or by name."""
    pools = {p.name for p in doc.machine_pools if (p.site, p.profile) == (site, profile)}
    hosts = {m.hostname for m in doc.machines if (m.site, m.profile) == (site, profile)}
    return {mnt.filesystem for mnt in doc.storage_mounts if pools & set(mnt.pools) or hosts & set(mnt.machines)}


def _client_packages(doc: EnvironmentDocument, site: str, profile: str) -> set[str]:
    mounted = _mounted_by(doc, site, profile)
    return {f.client.package for f in doc.filesystems if f.name in mounted and f.client and not f.lab_stand_in}


def weka_clients(doc: EnvironmentDocument, bp: Blueprint, file: str) -> Iterator[Finding]:
    """A WEKA filesystem MAAS machines mount needs its client from a vendor apt source their profile names."""
    sources = {a.name for a in doc.apt_sources}
    for j, fs in enumerate(doc.filesystems):
        base = f"filesystems[{j}]"
        users = [(s.name, p) for s in doc.sites for p in s.profiles if fs.name in _mounted_by(doc, s.name, p.name)]
        if fs.client is not None and fs.client.apt_source not in sources:
            yield finding(Code.UNKNOWN_APT_SOURCE, file, f"{base}.client.apt_source",
                          f"filesystem {fs.name}: its client's apt source {fs.client.apt_source!r} is not declared; "
                          f"declared: {', '.join(sorted(sources)) or 'none'}")
        if not users or fs.lab_stand_in is not None:
            continue  # only lab hosts mount it, or the lab's stand-in replaces it: no client to install
        if fs.client is None:
            yield finding(Code.WEKA_CLIENT_MISSING, file, base,
                          f"filesystem {fs.name} is mounted by MAAS machines of "
                          f"{', '.join(f'{s}/{p.name}' for s, p in users)} and declares no WEKA client")
            continue
        for site, p in users:
            if fs.client.apt_source not in p.apt_sources:
                yield finding(Code.WEKA_CLIENT_SOURCE_NOT_NAMED, file, f"{base}.client.apt_source",
                              f"filesystem {fs.name}: profile {site}/{p.name} mounts it but does not name apt source "
                              f"{fs.client.apt_source} (package {fs.client.package})")
