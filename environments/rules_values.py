"""Rules about values people type into an environment: endpoints, MAAS tag names, distro series and
the free-form bundle values. Registered in `rules.RULES` like every other rule."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator

from .findings import Code, Finding, finding
from .model import Blueprint, EnvironmentDocument
from .vocabulary import Tier

# MAAS accepts tag names of letters, digits, '-' and '_' only (canonical/maas,
# src/maasserver/models/tag.py: the tag name validator); anything else is a 400 at deploy time.
MAAS_TAG = re.compile(r"^[a-zA-Z0-9_-]+$")
# Ubuntu series MAAS deploys for this fleet (LTS releases with MAAS images: 20.04, 22.04, 24.04).
DISTRO_SERIES = ("focal", "jammy", "noble")
# Tiers that point at real sites: an `embedded` endpoint there is a stack that cannot reach anything.
REAL_TIERS = (Tier.STAGING, Tier.PROD)
# Bundle values render into node files: a key or a value that looks like a credential is refused.
_SECRET_KEY = re.compile(r"(pass(word)?|secret|token|api[_-]?key|private[_-]?key|credential)", re.I)
_SECRET_VALUE = re.compile(r"(-----BEGIN [A-Z ]*PRIVATE KEY-----|^AKIA[0-9A-Z]{16}$|^gh[pousr]_[A-Za-z0-9]{20,})")


# Node SSH material (seed 000 §1: no app, member or operation ever carries node SSH credentials): a key
# naming SSH, a private key block, or an OpenSSH public key line (an authorized_keys entry grants access too).
_SSH_KEY_NAME = re.compile(r"(ssh|authorized_keys|known_hosts|id_rsa|id_ed25519|id_ecdsa|host_key|private[_-]?key)",
                           re.I)
_SSH_VALUE = re.compile(r"(-----BEGIN [A-Z ]*PRIVATE KEY-----|^\s*(ssh-(rsa|ed25519|dss)|ecdsa-sha2-nistp\d+|"
                        r"sk-ssh-ed25519@openssh\.com) AAAA)")


def looks_like_ssh_material(key: str, value: object) -> bool:
    """An app input (or platform config entry) that would hand node SSH credentials to an app."""
    return bool(_SSH_KEY_NAME.search(key)) or (isinstance(value, str) and bool(_SSH_VALUE.search(value)))


def _entropy(value: str) -> float:
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def looks_secret(key: str, value: object) -> bool:
    """A documented heuristic: a credential-like key name, a known key format, or a long random-looking
    string (>= 24 characters, >= 4 bits of entropy per character, no spaces)."""
    if _SECRET_KEY.search(key):
        return True
    if not isinstance(value, str):
        return False
    if _SECRET_VALUE.search(value):
        return True
    return len(value) >= 24 and " " not in value and "/" not in value and _entropy(value) >= 4.0


def typed_values(doc: EnvironmentDocument, bp: Blueprint, file: str) -> Iterator[Finding]:
    endpoints = [("vault.address", doc.vault.address), ("platform.url", doc.platform.url),
                 ("artifact_store.endpoint_url", doc.artifact_store.endpoint_url)]
    endpoints += [(f"sites[{i}].maas_url", s.maas_url) for i, s in enumerate(doc.sites)]
    if doc.tier in REAL_TIERS:
        for path, value in endpoints:
            if value == "embedded":
                yield finding(Code.EMBEDDED_IN_REAL_TIER, file, path,
                              f"a {doc.tier.value} environment names the embedded simulators")
    for i, m in enumerate(doc.machines):
        for j, tag in enumerate(m.tags):
            if not MAAS_TAG.match(tag):
                yield finding(Code.INVALID_TAG, file, f"machines[{i}].tags[{j}]", f"MAAS refuses the tag name {tag!r}")
        if m.distro_series not in DISTRO_SERIES:
            yield finding(Code.UNKNOWN_SERIES, file, f"machines[{i}].distro_series",
                          f"unknown distro series {m.distro_series!r}",
                          hint=f"use one of {', '.join(DISTRO_SERIES)}")
    for i, b in enumerate(doc.bootstrap_bundles):
        for key, bundle_value in b.values.items():
            if looks_secret(key, bundle_value):  # never echo the value
                yield finding(Code.SECRET_IN_VALUES, file, f"bootstrap_bundles[{i}].values.{key}",
                              f"bundle value {key!r} looks like a secret; bundles are published to S3 and "
                              "rendered onto nodes")
