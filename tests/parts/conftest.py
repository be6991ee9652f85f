from tests.fixtures.engine import engine_factory  # noqa: F401
