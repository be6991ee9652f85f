"""One deploy attempt's user_data (providers/machines/cloud_init.py renders it): what the lifecycle's deploy adds
to the machine's spec at that moment: presigned URLs of the bundle, the validation bundle and the vendor apt
sources' signing keys (as long-lived as the enrollment token), the private CAs the node trusts, and the
login user's SSH keys and password hash read from Vault (docs/node-bootstrap.md)."""

from __future__ import annotations

from .cloud_init import render_user_data
from .records import Context, LifecycleRecord
from .spec import BundlePin


def deploy_user_data(ctx: Context, m: LifecycleRecord, node_id: str, token: str) -> bytes:
    """This attempt's user_data: presigned URLs (bundle, validation bundle, apt signing keys), the node's CAs and
    the login user's keys and password hash, read from Vault now (never kept)."""
    assert m.system_id
    # The presigned URLs live as long as the token: both must outlast the deploy and the first boot.
    ttl = ctx.policy.enrollment_token_ttl_seconds
    presign, deploy = ctx.presign, m.spec.deploy
    url = presign(m.spec, ttl) if presign is not None else ""
    pin = deploy.validation_bundle
    validation_url = presign(m.spec, ttl, pin) if presign is not None and pin is not None else ""
    key_urls = {k.source: presign(m.spec, ttl, BundlePin(ref=k.ref, digest=k.fingerprint, url=""))
                for k in deploy.apt_keys or ()} if presign is not None else {}
    user, read = deploy.login_user, ctx.read_secret
    if user is not None and (user.ssh_key_refs or user.password_hash_ref) and read is None:
        raise DeployInputError(f"{m.ident()}: the login user {user.name}'s SSH keys and password hash are in Vault, "
                               "and this run has no Vault reader")
    ssh_keys = tuple(read(ref).strip() for ref in user.ssh_key_refs) if user is not None and read else ()
    pw_hash = read(user.password_hash_ref).strip() if user is not None and user.password_hash_ref and read else ""
    return render_user_data(
        m.spec, platform_url=ctx.platform_url, node_id=node_id, token=token, system_id=m.system_id, bundle_url=url,
        validation_url=validation_url, ca_pem=ctx.node_ca, apt_key_urls=key_urls, ssh_keys=ssh_keys,
        password_hash=pw_hash,
    )


class DeployInputError(Exception):
    """A deploy's user_data cannot be made from its inputs (what is missing is in the message)."""
