"""The SDK's own dynamic provider server (``python -m pulumi.dynamic``), driven over gRPC.

One server process serves every dynamic resource, as under the real CLI; its 4-thread executor is what
bounds provider parallelism. Its stdout/stderr are passed through line by line with a prefix, so
progress lines from providers reach the user.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import grpc
from pulumi.runtime._grpc_settings import _GRPC_CHANNEL_OPTIONS
from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc

from engine.values import Props, from_struct, to_struct

PREFIX = "[provider] "
_METADATA_LIMITS = [("grpc.max_metadata_size", 16 << 20), ("grpc.absolute_max_metadata_size", 16 << 20)]


class ProviderError(Exception):
    """A provider method failed. ``message`` is the provider's own exception text (no traceback);
    ``details`` keeps the full traceback for ``GPUAAS_ENGINE_DEBUG=1``."""

    def __init__(self, message: str, details: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.details = details


def provider_message(details: str) -> str:
    """The exception line(s) at the end of a Python traceback, e.g. ``MaasError: machine gpu-01 ...``."""
    lines = details.rstrip().splitlines()
    if not lines:
        return "provider failed without a message"
    # The message starts after the last frame ('  File "...", line N') and its indented source lines.
    frames = [i for i, line in enumerate(lines) if line.startswith('  File "')]
    start = frames[-1] + 1 if frames else 0
    while frames and start < len(lines) and lines[start].startswith("    "):
        start += 1
    message = "\n".join(lines[start:]).strip() or lines[-1].strip()
    # Drop the module path of the exception class: "providers.maas.MaasError: x" -> "MaasError: x".
    head, sep, rest = message.partition(": ")
    if sep and " " not in head and "." in head:
        message = head.rsplit(".", 1)[1] + sep + rest
    return message


@dataclass
class DiffOutcome:
    changes: int  # provider_pb2.DiffResponse.DiffChanges value
    replaces: list[str] = field(default_factory=list)
    delete_before_replace: bool = False
    diffs: list[str] = field(default_factory=list)


def _die_with_parent() -> None:
    # A SIGKILL of the engine alone must not orphan the provider server (tests kill mid-operation).
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class ProviderHost:
    def __init__(self, project_dir: Path, project: str, sink: Callable[[str, bool], None] | None = None) -> None:
        """``sink(line, from_stderr)`` receives each line the provider server prints (newline included)."""
        self.project_dir = project_dir
        self.project = project
        self._sink = sink or (lambda line, _err: sys.stderr.write(PREFIX + line))
        self._proc: subprocess.Popen[bytes] | None = None
        self._channel: grpc.Channel | None = None
        self._stub: Any = None
        self._threads: list[threading.Thread] = []
        self._connect_lock = threading.Lock()
        self._config: dict[str, str] = {}

    def start(self, config: dict[str, str]) -> None:
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"  # the server writes its port without flushing
        env["PULUMI_PROJECT"] = self.project
        # Providers fork (ansible-runner's pexpect, subprocesses). With gRPC's fork support on, the forked
        # child restarts gRPC's poller threads before exec and can die on "epoll_wait: Bad file descriptor".
        env.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(self.project_dir), env.get("PYTHONPATH", "")) if p)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "pulumi.dynamic"],
            cwd=self.project_dir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=_die_with_parent,
            # Its own process group: a terminal's Ctrl-C must reach only the engine, which lets running
            # provider calls finish. It still dies with the engine (PR_SET_PDEATHSIG above).
            start_new_session=True,
        )
        self._config = dict(config)
        # The server boots while the program is imported; the first provider call waits for it.

    def _connect(self) -> None:
        with self._connect_lock:
            if self._stub is not None:
                return
            if self._proc is None:
                raise ProviderError("the dynamic provider server was not started")
            self._handshake()

    def _handshake(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None and self._proc.stderr is not None
        first = self._proc.stdout.readline().decode().strip()
        if not first.isdigit():
            err = self._proc.stderr.read().decode(errors="replace") if self._proc.poll() is not None else ""
            raise ProviderError(f"the dynamic provider server did not start (got {first!r}): {err.strip()}")
        for stream, is_err in ((self._proc.stdout, False), (self._proc.stderr, True)):
            t = threading.Thread(target=self._pump, args=(stream, is_err), daemon=True)
            t.start()
            self._threads.append(t)
        # The SDK's own channel options (message size limits), so big property bags pass as under the CLI,
        # plus the Go client's 16 MiB header limit: a provider's error travels in the status metadata, and
        # Python gRPC's default (8 KiB soft, 16 KiB hard) would cut a long failure report that the CLI shows.
        self._channel = grpc.insecure_channel(f"127.0.0.1:{first}", options=[*_GRPC_CHANNEL_OPTIONS, *_METADATA_LIMITS])
        stub = provider_pb2_grpc.ResourceProviderStub(self._channel)
        # Configure gets the whole stack config (namespaced keys, plaintext), as the CLI sends it.
        request = provider_pb2.ConfigureRequest(
            args=to_struct(self._config), acceptSecrets=False, acceptResources=False
        )
        try:
            stub.Configure(request)
        except grpc.RpcError as exn:
            details = exn.details() or str(exn)  # type: ignore[attr-defined]
            raise ProviderError(provider_message(details), details) from None
        self._stub = stub

    def _pump(self, stream: IO[bytes], is_err: bool) -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode(errors="replace").rstrip("\n") + "\n"
            if line.strip():  # plugin.go runtrace skips blank lines
                self._sink(line, is_err)

    def stop(self) -> None:
        if self._channel is not None:
            self._channel.close()
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        for t in self._threads:
            t.join(timeout=2)

    def _call(self, method: str, request: Any) -> Any:
        if self._stub is None:
            self._connect()
        try:
            return getattr(self._stub, method)(request)
        except grpc.RpcError as exn:
            details = exn.details() or str(exn)  # type: ignore[attr-defined]
            raise ProviderError(provider_message(details), details) from None

    def check(self, urn: str, olds: Props, news: Props) -> tuple[Props, list[tuple[str, str]]]:
        resp = self._call("Check", provider_pb2.CheckRequest(urn=urn, olds=to_struct(olds), news=to_struct(news)))
        return from_struct(resp.inputs), [(f.property, f.reason) for f in resp.failures]

    def diff(self, urn: str, id_: str, old_outputs: Props, news: Props, old_inputs: Props) -> DiffOutcome:
        resp = self._call(
            "Diff",
            provider_pb2.DiffRequest(
                id=id_,
                urn=urn,
                olds=to_struct(old_outputs),
                news=to_struct(news),
                old_inputs=to_struct(old_inputs),
            ),
        )
        return DiffOutcome(resp.changes, list(resp.replaces), resp.deleteBeforeReplace, list(resp.diffs))

    def create(self, urn: str, props: Props) -> tuple[str, Props]:
        resp = self._call("Create", provider_pb2.CreateRequest(urn=urn, properties=to_struct(props)))
        return resp.id, from_struct(resp.properties)

    def update(self, urn: str, id_: str, old_outputs: Props, news: Props, old_inputs: Props) -> Props:
        resp = self._call(
            "Update",
            provider_pb2.UpdateRequest(
                id=id_,
                urn=urn,
                olds=to_struct(old_outputs),
                news=to_struct(news),
                old_inputs=to_struct(old_inputs),
            ),
        )
        return from_struct(resp.properties)

    def read(self, urn: str, id_: str, props: Props, inputs: Props) -> tuple[str, Props, Props | None]:
        resp = self._call(
            "Read",
            provider_pb2.ReadRequest(id=id_, urn=urn, properties=to_struct(props), inputs=to_struct(inputs)),
        )
        new_inputs = from_struct(resp.inputs) if resp.HasField("inputs") else None
        return resp.id, from_struct(resp.properties), new_inputs

    def delete(self, urn: str, id_: str, props: Props, old_inputs: Props) -> None:
        self._call(
            "Delete",
            provider_pb2.DeleteRequest(id=id_, urn=urn, properties=to_struct(props), old_inputs=to_struct(old_inputs)),
        )
