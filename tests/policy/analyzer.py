"""Start the policy pack's analyzer the way the Pulumi CLI does, and speak its gRPC protocol.

The CLI runs `pulumi-analyzer-policy-python <engine> . -virtualenv=../.policy-venv` in the pack's
directory, which execs `<venv>/bin/python -u -m pulumi.policy <engine> .` with the stack's config in
PULUMI_CONFIG and PULUMI_PROJECT/STACK/DRY_RUN set; the pack prints its port on stdout. The engine
then calls Handshake (older packs: unimplemented), ConfigureStack, GetAnalyzerInfo, Analyze per
resource and AnalyzeStack at the end. This client does the same, from the project's .venv (the
protocol is protobuf on the wire, so the two protobuf versions never meet in one process).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import empty_pb2, struct_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc

REPO = Path(__file__).resolve().parents[2]
PACK_DIR = REPO / "policy"
POLICY_PYTHON = REPO / ".policy-venv" / "bin" / "python"
PROJECT = "gpuaas-infra"
ENFORCEMENT = {0: "advisory", 1: "mandatory", 2: "disabled", 3: "remediate"}


@dataclass(frozen=True)
class Violation:
    policy: str
    urn: str
    message: str
    enforcement: str


@dataclass(frozen=True)
class Resource:
    """A resource as the engine sends it: type, URN, inputs (no `__` keys), options."""

    urn: str
    type: str
    inputs: dict[str, Any]
    protect: bool = False
    parent: str = ""

    @property
    def name(self) -> str:
        return self.urn.split("::")[-1]


def _struct(props: dict[str, Any]) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update({k: v for k, v in props.items() if not k.startswith("__")})  # SkipInternalKeys, as the CLI
    return s


class PolicyAnalyzer:
    """Context manager: a running policy pack for one stack."""

    def __init__(self, stack: str, config: dict[str, str], *, dry_run: bool = True, start_timeout: float = 60.0):
        self.stack, self.config, self.dry_run, self.start_timeout = stack, config, dry_run, start_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._channel: grpc.Channel | None = None
        self.stub: analyzer_pb2_grpc.AnalyzerStub

    def __enter__(self) -> PolicyAnalyzer:
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)  # the pack runs on its own venv only
        env.update(
            {
                "PULUMI_CONFIG": json.dumps(self.config),
                "PULUMI_PROJECT": PROJECT,
                "PULUMI_STACK": self.stack,
                "PULUMI_DRY_RUN": str(self.dry_run).lower(),
                "PULUMI_ORGANIZATION": "organization",
            }
        )
        # The engine address is where the pack would send logs; nothing in the pack dials it.
        self._proc = subprocess.Popen(
            [str(POLICY_PYTHON), "-u", "-m", "pulumi.policy", "127.0.0.1:0", "."],
            cwd=PACK_DIR,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        port = self._read_port()
        self._channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        grpc.channel_ready_future(self._channel).result(timeout=self.start_timeout)
        self.stub = analyzer_pb2_grpc.AnalyzerStub(self._channel)
        self._handshake()
        self.stub.ConfigureStack(
            analyzer_pb2.AnalyzerStackConfigureRequest(
                stack=self.stack, project=PROJECT, organization="organization", dry_run=self.dry_run, config=self.config
            )
        )
        return self

    def _read_port(self) -> int:
        assert self._proc is not None and self._proc.stdout is not None
        deadline = time.monotonic() + self.start_timeout
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._proc.stdout], [], [], max(left, 0))
            if not ready or self._proc.poll() is not None and not ready:
                err = self._proc.stderr.read().decode(errors="replace") if self._proc.poll() is not None else ""
                raise RuntimeError(f"policy pack did not print its port within {self.start_timeout}s: {err[-2000:]}")
            chunk = os.read(self._proc.stdout.fileno(), 64)
            if not chunk:
                err = self._proc.stderr.read().decode(errors="replace")
                raise RuntimeError(f"policy pack exited before printing its port: {err[-2000:]}")
            line += chunk
        return int(line.strip())

    def _handshake(self) -> None:
        try:
            self.stub.Handshake(
                analyzer_pb2.AnalyzerHandshakeRequest(
                    engine_address="127.0.0.1:0", root_directory=str(PACK_DIR), program_directory=str(PACK_DIR)
                )
            )
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.UNIMPLEMENTED:  # pulumi-policy 1.21 predates Handshake
                raise

    def __exit__(self, *exc: object) -> None:
        if self._channel is not None:
            self._channel.close()
        if self._proc is not None and self._proc.poll() is None:
            os.killpg(self._proc.pid, signal.SIGTERM)
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait()
        if self._proc is not None:
            for stream in (self._proc.stdout, self._proc.stderr):
                if stream is not None:
                    stream.close()

    # -- the engine's calls ---------------------------------------------------------------------
    def info(self) -> Any:
        return self.stub.GetAnalyzerInfo(empty_pb2.Empty())

    def _violations(self, resp: Any, default_urn: str = "") -> list[Violation]:
        return [
            Violation(d.policyName, d.urn or default_urn, d.message, ENFORCEMENT.get(d.enforcementLevel, "?"))
            for d in resp.diagnostics
        ]

    def analyze(self, r: Resource) -> list[Violation]:
        resp = self.stub.Analyze(
            analyzer_pb2.AnalyzeRequest(
                urn=r.urn,
                type=r.type,
                name=r.name,
                properties=_struct(r.inputs),
                options=analyzer_pb2.AnalyzerResourceOptions(protect=r.protect, parent=r.parent),
            )
        )
        return self._violations(resp, r.urn)

    def analyze_stack(self, resources: list[Resource]) -> list[Violation]:
        resp = self.stub.AnalyzeStack(
            analyzer_pb2.AnalyzeStackRequest(
                resources=[
                    analyzer_pb2.AnalyzerResource(
                        urn=r.urn,
                        type=r.type,
                        name=r.name,
                        properties=_struct(r.inputs),
                        options=analyzer_pb2.AnalyzerResourceOptions(protect=r.protect),
                        parent=r.parent,
                    )
                    for r in resources
                ]
            )
        )
        return self._violations(resp)

    def check(self, resources: list[Resource]) -> list[Violation]:
        """Everything the engine would report for a preview of these resources."""
        out = [v for r in resources for v in self.analyze(r)]
        return out + self.analyze_stack(resources)
