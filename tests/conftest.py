"""Fixtures shared by every test area (each area's own conftest adds its servers)."""

from tests.fixtures.engine import engine_factory  # noqa: F401  (the CLI-free engine)
