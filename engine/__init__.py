"""CLI-free test engine: runs a Pulumi project's program against an in-process resource monitor and the
SDK's real dynamic provider server, with a JSON state file. For tests and machines without the Pulumi
CLI; users run the real CLI. See docs/engine.md."""

from clients.threadsafe_ast import install
from engine.api import Engine, EngineHandle
from engine.crypto import TEST_PASSPHRASE
from engine.model import Diagnostic, EngineResult, Operation, Severity, Step, StepOp
from engine.state import read_state

install()  # threads import modules concurrently (clients/threadsafe_ast.py)

__all__ = [
    "Diagnostic",
    "Engine",
    "EngineHandle",
    "EngineResult",
    "Operation",
    "Severity",
    "Step",
    "StepOp",
    "TEST_PASSPHRASE",
    "read_state",
]
