"""A thread that reads MAAS while a run goes on: the bounds a read after the run cannot see (how many
machines were in heavy stages at once, per stack). Shared by the stack tests that check
batch_max_parallel from MAAS's side."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from simulators.localstack import LocalStack

T = TypeVar("T")


class MaasSampler(threading.Thread, Generic[T]):
    """Every `every` seconds: `sample` of MAAS's machines (hostname -> the admin view), kept in order."""

    def __init__(
        self, world: LocalStack, sample: Callable[[dict[str, dict[str, Any]]], T], every: float = 0.01
    ) -> None:
        super().__init__(daemon=True)
        self.world, self.sample, self.every = world, sample, every
        self.samples: list[T] = []
        self.stop = threading.Event()

    def run(self) -> None:
        assert self.world.maas is not None
        while not self.stop.is_set():
            self.samples.append(self.sample({m["hostname"]: m for m in self.world.maas.admin.machines()}))
            time.sleep(self.every)

    def __enter__(self) -> MaasSampler[T]:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.join()
