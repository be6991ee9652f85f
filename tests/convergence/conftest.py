import time
from collections.abc import Iterator

import pytest

from tests.fixtures.engine import engine_factory  # noqa: F401


@pytest.fixture
def report() -> Iterator[list[tuple[str, float]]]:
    stages: list[tuple[str, float]] = []
    start = time.monotonic()
    yield stages
    print(f"\n{len(stages)} stages in {time.monotonic() - start:.0f} s:")
    for label, seconds in stages:
        print(f"  {seconds:6.1f} s  {label}")
