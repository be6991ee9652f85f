"""An in-memory KV v2 check-and-set store for the slot-lease tests (the semantics of Vault's `cas`:
a write succeeds only when the latest version is still the one named; 0 means "none yet")."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import Any


class FakeCas:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.docs: dict[str, tuple[dict[str, Any], int]] = {}
        self.reads = 0
        self.writes = 0
        self.rejected = 0
        self.after_read: Callable[[], None] | None = None
        """Runs after every read, outside the lock: lets a test interleave another writer there."""
        self.fail: Exception | None = None

    def read_doc(self, path: str) -> tuple[dict[str, Any] | None, int]:
        if self.fail is not None:
            raise self.fail
        with self._lock:
            self.reads += 1
            doc, version = self.docs.get(path, (None, 0))
            out = (copy.deepcopy(doc), version)
        if self.after_read is not None:
            hook, self.after_read = self.after_read, None  # once: the hook may itself read
            hook()
        return out

    def write_doc(self, path: str, doc: dict[str, Any], cas: int) -> bool:
        if self.fail is not None:
            raise self.fail
        with self._lock:
            self.writes += 1
            _, version = self.docs.get(path, (None, 0))
            if version != cas:
                self.rejected += 1
                return False
            self.docs[path] = (copy.deepcopy(doc), version + 1)
            return True

    def holders(self, path: str) -> dict[str, Any]:
        with self._lock:
            doc, _ = self.docs.get(path, ({}, 0))
            return dict((doc or {}).get("holders", {}))
