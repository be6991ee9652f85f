"""`gpuaas-infra stack <preview|up|refresh|destroy> --stack S [pulumi flags]`, `... stack init S`: the pipeline's
way to run the program with the Pulumi CLI on PATH, whatever build it is.

The program runs as an Automation API inline program: this process serves it to the CLI (the SDK's language
server over `--client`, `--exec-kind inline`), the CLI does everything else (engine, state, secrets, plugins,
policy packs) in the checkout (`Pulumi.yaml`, `stacks/`). That is how the tests run it (tools/pulumi_cli), and
it needs no Python language host: the CLI the tests build from Go modules has none (docs/pulumi-cli.md), an
official release has one and works the same. The CLI's output passes through unchanged (`--json` documents
included); the exit status is the CLI's.

`stack init S` creates the stack on the backend (`PULUMI_BACKEND_URL`) with the secrets provider its stack file
names (`secretsprovider: hashivault://gpuaas-<stack>`), which writes the stack's `encryptedkey` into
`stacks/Pulumi.<S>.yaml`: commit it (docs/operations.md §0). A stack that exists already is left as it is.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import shutil
import subprocess
import sys
from collections.abc import Callable
from concurrent import futures
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
PROGRAM_VERBS = ("preview", "up", "refresh", "destroy")
# As the Automation API's own server: a fleet's pool inputs are megabytes.
_GRPC_OPTIONS = [("grpc.max_receive_message_length", 2**31 - 1), ("grpc.max_send_message_length", 2**31 - 1)]


def pulumi_binary() -> str:
    """The CLI on PATH (the pipeline puts build/pulumi/bin first: the pinned CLI set-up provides)."""
    found = shutil.which("pulumi")
    if found is None:
        raise SystemExit("gpuaas-infra stack: no `pulumi` on PATH; run `make setup` and put build/pulumi/bin first")
    return found


def stack_file(stack: str, repo: Path = REPO) -> Path:
    doc = yaml.safe_load((repo / "Pulumi.yaml").read_text()) or {}
    return repo / str(doc.get("stackConfigDir") or ".") / f"Pulumi.{stack}.yaml"


def _program(repo: Path) -> Callable[[], None]:
    doc = yaml.safe_load((repo / "Pulumi.yaml").read_text()) or {}
    main = repo / str(doc.get("main") or "__main__.py")

    def program() -> None:
        runpy.run_path(str(main if main.is_file() else main / "__main__.py"), run_name="__main__")

    return program


def run_program(verb: str, args: list[str], repo: Path = REPO) -> int:
    """`pulumi <verb> <args>` with the program served inline from this process."""
    import grpc  # local: only program runs need the SDK's server
    from pulumi.automation._server import LanguageServer
    from pulumi.runtime.proto import language_pb2_grpc

    sys.path.insert(0, str(repo))
    os.chdir(repo)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=_GRPC_OPTIONS)
    language_pb2_grpc.add_LanguageRuntimeServicer_to_server(LanguageServer(_program(repo)), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(repo), env.get("PYTHONPATH", "")) if p)
    # The inline program's flags (--client, --exec-kind; --event-log) are the CLI's hidden debug commands; the
    # dynamic-provider plugin runs `$PULUMI_PYTHON_CMD -m pulumi.dynamic`: this venv's Python.
    env["PULUMI_DEBUG_COMMANDS"] = "true"
    env.setdefault("PULUMI_PYTHON_CMD", sys.executable)
    env.setdefault("PYTHONUNBUFFERED", "1")
    try:
        cmd = [pulumi_binary(), verb, *args, "--non-interactive", f"--client=127.0.0.1:{port}", "--exec-kind", "inline"]
        return subprocess.run(cmd, cwd=repo, env=env, check=False).returncode
    finally:
        server.stop(0)


def init_stack(stack: str, repo: Path = REPO) -> int:
    """Create `stack` with its stack file's secrets provider unless the backend has it already."""
    path = stack_file(stack, repo)
    if not path.is_file():
        sys.stderr.write(f"gpuaas-infra stack init: {path.relative_to(repo)} does not exist: add the stack's file\n")
        return 2
    doc = yaml.safe_load(path.read_text()) or {}
    provider = str(doc.get("secretsprovider") or "")
    cli = pulumi_binary()
    if subprocess.run([cli, "stack", "select", stack, "--non-interactive"], cwd=repo, capture_output=True,
                      check=False).returncode == 0:
        if provider.startswith("hashivault://") and not doc.get("encryptedkey"):
            return _recover_key(cli, stack, path, repo)
        print(f"stack {stack} exists on the backend: nothing to do")
        return 0
    cmd = [cli, "stack", "init", stack, "--non-interactive", *(["--secrets-provider", provider] if provider else [])]
    proc = subprocess.run(cmd, cwd=repo, check=False)
    if proc.returncode != 0:
        return proc.returncode
    written = (yaml.safe_load(path.read_text()) or {}).get("encryptedkey")
    if provider.startswith("hashivault://") and not written:
        sys.stderr.write(f"gpuaas-infra stack init: {stack} was created but no encryptedkey was written into "
                         f"{path.relative_to(repo)}\n")
        return 1
    print(f"stack {stack} created with {provider or 'the default secrets provider'}; "
          f"commit {path.relative_to(repo)} (its encryptedkey)")
    return 0


def _recover_key(cli: str, stack: str, path: Path, repo: Path) -> int:
    """The stack exists but its file lost the `encryptedkey` (never committed): without it the CLI would make a
    new data key in this checkout. Its state keeps the key its secrets were written with: put that back."""
    export = subprocess.run([cli, "stack", "export", "--stack", stack], cwd=repo, capture_output=True, text=True,
                            check=False)
    state = ((json.loads(export.stdout or "{}").get("deployment") or {}).get("secrets_providers") or {}).get("state")
    key = (state or {}).get("encryptedkey")
    if export.returncode != 0 or not key:
        sys.stderr.write(f"gpuaas-infra stack init: {stack} exists but neither {path.relative_to(repo)} nor its "
                         "state holds its encryptedkey; restore the committed stack file\n")
        return 1
    text = path.read_text()
    path.write_text(text.rstrip("\n") + f"\nencryptedkey: {key}\n")
    print(f"stack {stack} exists: its encryptedkey was restored from its state into {path.relative_to(repo)}; "
          "commit it")
    return 0


def stack_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="gpuaas-infra stack", description=__doc__.splitlines()[0],
                                     epilog="Everything after the verb goes to `pulumi <verb>` (e.g. --stack dev "
                                            "--json --policy-pack $PWD/policy/run-policy-pack).")
    parser.add_argument("verb", choices=(*PROGRAM_VERBS, "init"))
    parser.add_argument("rest", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.verb == "init":
        if len(args.rest) != 1:
            parser.error("usage: gpuaas-infra stack init <stack>")
        return init_stack(args.rest[0])
    return run_program(args.verb, list(args.rest))
