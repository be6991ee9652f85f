"""`eval "$(gpuaas-infra vault-login)"`: log in to Vault with AppRole and export the token for the Pulumi CLI.

The pipeline's credentials are an AppRole (`VAULT_ROLE_ID`, `VAULT_SECRET_ID`: masked CI/CD variables); the
stacks' `hashivault://` secrets provider (Vault transit) reads `VAULT_TOKEN` only. This prints
`export VAULT_TOKEN='<token>'` for the job's shell to evaluate (GitLab echoes the command, never what a
command substitution returns), and nothing else on stdout. `VAULT_ADDR` and `VAULT_CACERT` as Vault's own
CLI reads them. Exit 1 with the reason (never a credential) when the login fails.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys

from pydantic import SecretStr

from clients.vault import VaultAuthMethod, VaultCredentials, VaultError, VaultReader, VaultSettings


def vault_login_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="gpuaas-infra vault-login", description=__doc__.splitlines()[0])
    parser.add_argument("--mount", default="approle", help="the AppRole auth mount (default approle)")
    args = parser.parse_args(argv)
    address = os.environ.get("VAULT_ADDR", "")
    role_id, secret_id = os.environ.get("VAULT_ROLE_ID"), os.environ.get("VAULT_SECRET_ID")
    if not address or not role_id or not secret_id:
        sys.stderr.write("gpuaas-infra vault-login: set VAULT_ADDR, VAULT_ROLE_ID and VAULT_SECRET_ID "
                         "(masked CI/CD variables; docs/operations.md)\n")
        return 1
    settings = VaultSettings(address=address, auth_method=VaultAuthMethod.APPROLE, approle_mount=args.mount,
                             ca_bundle=os.environ.get("VAULT_CACERT") or None, timeout_s=15.0)
    reader = VaultReader(settings, VaultCredentials(role_id=SecretStr(role_id), secret_id=SecretStr(secret_id)))
    try:
        token = reader.token()
    except VaultError as e:
        sys.stderr.write(f"gpuaas-infra vault-login: {e}\n")
        return 1
    sys.stdout.write(f"export VAULT_TOKEN={shlex.quote(token.get_secret_value())}\n")
    return 0
