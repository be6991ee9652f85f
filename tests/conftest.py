"""Fixtures shared by every test area (each area's own conftest adds its servers)."""

import pytest

from clients.threadsafe_ast import install
from tests.fixtures.engine import engine_factory  # noqa: F401  (the CLI-free engine)
from tests.fixtures.lab_gate import SKIPPED
from tests.fixtures.policy import policy_venv  # noqa: F401  (make policy-venv: the policy pack's own venv)

install()  # simulators and moto serve on threads in this process (clients/threadsafe_ast.py)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """A tier that could not run on this machine is said loudly at the end, never only as an `s`."""
    for tier, reason in sorted(SKIPPED.items()):
        terminalreporter.write_sep("!", f"{tier.upper()} SKIPPED: {reason}", red=True, bold=True)
