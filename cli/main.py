"""`gpuaas-infra` console script: a subcommand dispatcher.

To add a subcommand, add one line to COMMANDS: name -> ("module:function", one-line help).
The function takes the remaining argv (list[str]) and returns an exit code; it builds its own
argparse parser, so this module imports nothing until a command is chosen (fast `--help`).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence

COMMANDS: dict[str, tuple[str, str]] = {
    "preview-note": (
        "preview_note.cli:preview_note_main",
        "render `pulumi preview --json` output of one or more stacks as a Markdown note",
    ),
    "post-note": (
        "preview_note.cli:post_note_main",
        "create or update the merge-request note of one stack through GitLab's notes API",
    ),
    "secrets": (
        "cli.secrets:secrets_main",
        "list the Vault entries an environment needs (path, key, shape, readers); --template to fill in",
    ),
    "doctor": (
        "cli.doctor:doctor_main",
        "read-only pre-flight checks: endpoints, TLS, Vault entries, MAAS/platform/S3 credentials",
    ),
    "pin": (
        "cli.pin:pin_main",
        "url + sha256 of a host artifact (a downloaded file or its URL), written into an environment's pins file",
    ),
    "stack": (
        "cli.stack:stack_main",
        "run `pulumi preview|up|refresh|destroy` with the program served inline (any CLI build), or `stack init`",
    ),
    "vault-login": (
        "cli.vault_login:vault_login_main",
        "AppRole login (VAULT_ROLE_ID, VAULT_SECRET_ID); prints `export VAULT_TOKEN=...` for the job's shell",
    ),
    "ci-lint": (
        "ci_lint.lint:main",
        "validate .gitlab-ci.yml offline (schema + project rules)",
    ),
}


def _usage() -> str:
    width = max(len(n) for n in COMMANDS)
    rows = "\n".join(f"  {name.ljust(width)}  {help_}" for name, (_, help_) in sorted(COMMANDS.items()))
    return (
        f"usage: gpuaas-infra <command> [options]\n\ncommands:\n{rows}\n\n"
        "Run `gpuaas-infra <command> --help` for a command's options.\n"
    )


def resolve(name: str) -> Callable[[list[str]], int]:
    target, _ = COMMANDS[name]
    module, func = target.split(":")
    return getattr(importlib.import_module(module), func)  # type: ignore[no-any-return]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        sys.stdout.write(_usage())
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        sys.stderr.write(f"gpuaas-infra: unknown command {name!r}\n\n{_usage()}")
        return 2
    return resolve(name)(rest)


if __name__ == "__main__":
    sys.exit(main())
