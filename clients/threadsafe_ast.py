"""Serialise `ast.parse` on CPython versions where concurrent calls corrupt a shared counter.

CPython 3.11 before 3.11.8 (and 3.12 before 3.12.2) keeps the AST constructor's recursion depth in
interpreter-wide state; when GC releases the GIL inside one `ast.parse`, another thread's call
changes it and one of them fails with "SystemError: AST constructor recursion depth mismatch"
(python/cpython gh-106905, fixed by PR 113035). Our processes hit it without parsing anything
themselves: pydantic calls `inspect.signature` on builtin default factories while model classes are
defined, and `inspect` parses their text signatures. The dynamic provider imports modules on its gRPC
worker threads, so two resources' first calls race (seen in CI as a failed RoceAssignment update).
Debian 12's python3.11 is 3.11.2, so this matters where the project runs.
"""

from __future__ import annotations

import ast
import sys
import threading
from typing import Any

_lock = threading.RLock()  # re-entrant: a GC finalizer on the same thread may parse again


def affected(version: tuple[int, int, int] = sys.version_info[:3]) -> bool:
    """True for the CPython versions without the fix."""
    return (3, 11, 0) <= version < (3, 11, 8) or (3, 12, 0) <= version < (3, 12, 2)


def install() -> None:
    """Wrap `ast.parse` in a process-wide lock, once, on affected versions only."""
    if not affected() or getattr(ast.parse, "_gpuaas_serialised", False):
        return
    parse = ast.parse

    def serialised(*args: Any, **kwargs: Any) -> Any:
        with _lock:
            return parse(*args, **kwargs)

    serialised._gpuaas_serialised = True  # type: ignore[attr-defined]
    serialised.__wrapped__ = parse  # type: ignore[attr-defined]
    ast.parse = serialised  # type: ignore[assignment]
