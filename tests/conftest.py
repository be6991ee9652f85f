"""Fixtures shared by every test area (each area's own conftest adds its servers)."""

from collections import Counter

import pytest

from clients.threadsafe_ast import install
from tests.fixtures.engine import engine_factory  # noqa: F401  (the CLI-free engine)
from tests.fixtures.lab_gate import LAB_TIER_WALL, SKIP_PATTERN
from tests.fixtures.policy import policy_venv  # noqa: F401  (make policy-venv: the policy pack's own venv)

install()  # simulators and moto serve on threads in this process (clients/threadsafe_ast.py)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files run first, by their `slow(seconds=...)` mark (a file's tests stay together and in
    order). Under make test's `--dist loadfile --no-loadscope-reorder` a worker takes a whole file, in this
    order, so the run ends when its last file does: the long files must start early and the short ones fill the
    gaps (xdist's own order, most tests first, started the 230 s redeploy-kill file 25 minutes into a run)."""
    twice = sorted(nodeid for nodeid, n in Counter(item.nodeid for item in items).items() if n > 1)
    if twice:  # pytest-xdist schedules by node id: it would run one test of each and report the rest as nothing
        raise pytest.UsageError(
            f"{len(twice)} node id(s) name more than one collected test, e.g. {twice[0]}: under make test's "
            "pytest-xdist only the first of each runs and the others are silently dropped; give each its own id "
            "(pyproject.toml pins pytest 9.1.1: 9.2.0 gives a schemathesis test's operations one id)")
    weight: dict[object, float] = {}
    for item in items:
        mark = item.get_closest_marker("slow")
        if mark is not None:
            weight[item.path] = max(weight.get(item.path, 0.0), float(mark.kwargs.get("seconds", 60)))
    items.sort(key=lambda item: -weight.get(item.path, 0.0))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """A tier that could not run on this machine is said loudly at the end, never only as an `s`; the lab
    tier's wall time too. Both come from the run's reports, so they work in a pytest-xdist controller."""
    skipped: dict[str, str] = {}
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = getattr(report, "longrepr", None)
        message = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr or "")
        found = SKIP_PATTERN.search(message.removeprefix("Skipped: "))
        if found:
            skipped[found["tier"]] = found["reason"]
    for tier, reason in sorted(skipped.items()):
        terminalreporter.write_sep("!", f"{tier.upper()} SKIPPED: {reason}", red=True, bold=True)
    for reports in terminalreporter.stats.values():
        for report in reports:
            for key, value in getattr(report, "user_properties", None) or []:
                if key == LAB_TIER_WALL:
                    terminalreporter.write_sep("=", f"{LAB_TIER_WALL}: {value}", bold=True)
