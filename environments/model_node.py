"""What a deployed node gets beyond the bundle's files: vendor apt repositories (seed 001: Lambda stack,
DOCA/OFED, the WEKA client come from vendor repositories, not the distro) and the post-deploy login user
(seed 001: the H200 cloud-init sets `hpcadmin` and sudo). Referenced by `model.py`'s `SiteProfile` and
`EnvironmentDocument`; docs/node-bootstrap.md says how a node applies them."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from .model_base import Endpoint, Name, VaultRef, _Model

# ---------------------------------------------------------------------------------------------
# Vendor apt repositories


class AptSigningKey(_Model):
    """The OpenPGP key a repository's Release file is signed with: the key itself is an object in the
    environment's artifact store (public, ASCII-armored), checked on the node against its fingerprint."""

    fingerprint: str = Field(pattern=r"^[0-9A-F]{40}$")
    """The primary key's v4 fingerprint: 40 upper-case hex digits, no spaces (`gpg --show-keys` prints it)."""
    object: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_./-]{0,500}$")
    """The key's object key in `artifact_store.bucket`, e.g. `apt-keys/lambda.asc`."""


class AptSource(_Model):
    """One apt repository (deb822 `Types: deb`): `url`, `suite`, `components`, `Signed-By` its own key."""

    name: Name
    url: Endpoint
    suite: str = Field(pattern=r"^[A-Za-z0-9_.~/+-]{1,100}$")
    """A suite (`jammy`), or for a flat repository a path ending in `/` (`./`) with no components."""
    components: tuple[str, ...] = ()
    signing_key: AptSigningKey
    packages: tuple[str, ...] = ()
    """The vendor packages this repository provides: a step that cannot install one names this source."""


# ---------------------------------------------------------------------------------------------
# The post-deploy login user (seed 001)


class PasswordMode(StrEnum):
    LOCKED = "locked"  # no password login: SSH keys only
    HASH = "hash"  # a crypt(3) hash read from Vault at deploy time


class PasswordPolicy(_Model):
    mode: PasswordMode = PasswordMode.LOCKED
    hash_ref: VaultRef | None = None
    """With `mode: hash`: the Vault reference of the password's crypt(3) hash (`$6$...`, `$y$...`), never the
    password itself."""
    expire: bool = False
    """With `mode: hash`: the password must be changed at the first login."""


class SudoMode(StrEnum):
    NONE = "none"
    PASSWORD = "password"  # ALL=(ALL) ALL
    NOPASSWD = "nopasswd"  # ALL=(ALL) NOPASSWD:ALL


class LoginUser(_Model):
    """A site profile's login user, created on each deployed node by cloud-init from the deploy user_data."""

    name: str = Field(pattern=r"^[a-z_][a-z0-9_-]{0,31}$")
    groups: tuple[str, ...] = ()
    shell: str = Field("/bin/bash", pattern=r"^/[A-Za-z0-9_./-]{1,100}$")
    sudo: SudoMode = SudoMode.NONE
    ssh_authorized_keys: tuple[VaultRef, ...] = ()
    """Vault references, each holding one public key line (`ssh-ed25519 AAAA... comment`), read at deploy."""
    password: PasswordPolicy = PasswordPolicy()


__all__ = ["AptSigningKey", "AptSource", "LoginUser", "PasswordMode", "PasswordPolicy", "SudoMode"]
