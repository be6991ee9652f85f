"""Per-script results of commissioning and testing runs, and the API that reads them: canonical/maas
`maasserver/api/scriptresults.py` (after MAAS 2.2; `urls_api.py`: `nodes/{system_id}/results/` and
`nodes/{system_id}/results/{id}/`), `metadataserver/enum.py` (RESULT_TYPE, SCRIPT_STATUS).

Each commissioning and testing run of a machine records one script set: one result per script it ran
(the requested scripts, else MAAS's defaults), passed, or failed with exit status 1 when a fault is
injected (`MachineFaults.commissioning_failures` / `testing_failures`: the failing script is named in
the machine's error description, as MAAS's)."""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import format_datetime
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from clients.maas.vocabulary import ScriptStatus  # MAAS's SCRIPT_STATUS: one copy

from . import errors
from .routes import Request, RouteTable

if TYPE_CHECKING:
    from .core import SimCore
    from .state import Machine, Store


class ResultType(IntEnum):
    COMMISSIONING = 0
    INSTALLATION = 1
    TESTING = 2


RESULT_TYPE_NAMES = {ResultType.COMMISSIONING: "Commissioning", ResultType.INSTALLATION: "Installation",
                     ResultType.TESTING: "Testing"}


STATUS_NAMES = {ScriptStatus.PENDING: "Pending", ScriptStatus.RUNNING: "Running", ScriptStatus.PASSED: "Passed",
                ScriptStatus.FAILED: "Failed", ScriptStatus.TIMEDOUT: "Timed out", ScriptStatus.ABORTED: "Aborted"}
# What MAAS runs when a commission names none (abridged: the names the lifecycle sees in errors).
DEFAULT_COMMISSIONING = ["20-maas-01-install-lldpd", "20-maas-03-machine-resources", "50-maas-01-commissioning"]
DEFAULT_TESTING = ["smartctl-validate"]


@dataclass
class ScriptResult:
    id: int
    name: str
    status: ScriptStatus
    exit_status: int | None
    started: float
    ended: float
    output: bytes = b""


@dataclass
class ScriptSet:
    id: int
    result_type: ResultType
    last_ping: float
    results: list[ScriptResult] = field(default_factory=list)


def script_sets(m: Machine) -> list[ScriptSet]:
    """The machine's runs, oldest first (machines pickled before results existed have none)."""
    sets: list[ScriptSet] | None = getattr(m, "script_sets", None)
    if sets is None:
        sets = []
        m.script_sets = sets  # type: ignore[attr-defined]
    return sets


def record_run(store: Store, m: Machine, kind: ResultType, names: list[str], failed: str | None,
               duration_s: float) -> None:
    """One run's results: `failed` (a name in `names`) failed with exit status 1, the others passed."""
    now = time.time()
    started = now - duration_s
    run = ScriptSet(store.next_id("script_set"), kind, now)
    for name in names:
        bad = name == failed
        out = (f"{name}: injected fault: exit 1\n" if bad else f"{name}: ok\n").encode()
        run.results.append(ScriptResult(store.next_id("script_result"), name,
                                        ScriptStatus.FAILED if bad else ScriptStatus.PASSED, 1 if bad else 0,
                                        started, now, out))
    script_sets(m).append(run)


def run_names(kind: ResultType, requested: list[str]) -> list[str]:
    wanted = [n for n in requested if n and n != "none"]
    if kind is ResultType.COMMISSIONING:
        return DEFAULT_COMMISSIONING + [n for n in wanted if n not in DEFAULT_COMMISSIONING]
    return wanted or list(DEFAULT_TESTING)


def _time(ts: float | None) -> str | None:
    return None if ts is None else format_datetime(datetime.fromtimestamp(ts, UTC))


def _set_json(m: Machine, s: ScriptSet, include_output: bool, filters: list[str] | None) -> dict[str, Any]:
    results = []
    for r in sorted(s.results, key=lambda r: r.name):
        if filters is not None and not any(f == r.name or (f.isdigit() and int(f) == r.id) for f in filters):
            continue
        item: dict[str, Any] = {
            "id": r.id, "created": _time(r.started), "updated": _time(r.ended), "name": r.name,
            "status": int(r.status), "status_name": STATUS_NAMES[r.status], "exit_status": r.exit_status,
            "started": _time(r.started), "ended": _time(r.ended), "runtime": f"0:00:{int(r.ended - r.started):02d}",
            "script_id": None, "script_revision_id": None,
        }
        if include_output:
            item |= {"output": base64.b64encode(r.output).decode(), "stdout": base64.b64encode(r.output).decode(),
                     "stderr": ""}
        results.append(item)
    return {"id": s.id, "system_id": m.system_id, "type": int(s.result_type),
            "type_name": RESULT_TYPE_NAMES[s.result_type], "last_ping": _time(s.last_ping), "results": results,
            "resource_uri": f"/MAAS/api/2.0/nodes/{m.system_id}/results/{s.id}/"}


def _type(text: str | None) -> ResultType | None:
    if text is None:
        return None
    if text.isdigit():
        return ResultType(int(text))
    for kind, words in ((ResultType.TESTING, ("test", "testing")),
                        (ResultType.COMMISSIONING, ("commission", "commissioning")),
                        (ResultType.INSTALLATION, ("install", "installation"))):
        if text in words:
            return kind
    raise errors.validation(f'Unknown type "{text}": type must be the type numeric value testing, commissioning, '
                            "or installation.")


def register(routes: RouteTable, core: SimCore) -> None:
    store = core.store
    results = routes.handler("NodeScriptResultsHandler", "nodes/{system_id}/results/",
                             doc="Manage node script results.")
    result = routes.handler("NodeScriptResultHandler", "nodes/{system_id}/results/{id}/",
                            doc="Manage node script results.")

    def machine(req: Request) -> Machine:
        return store.node(req.params["system_id"])

    def filters(req: Request) -> list[str] | None:
        text = req.get("filters")
        return text.split(",") if text is not None else None

    @results.action("read", "GET")
    def read_results(req: Request) -> Any:
        """Return a list of script results grouped by run (type: commissioning, testing, installation)."""
        with store.lock:
            m, kind = machine(req), _type(req.get("type"))
            return [_set_json(m, s, req.get_bool("include_output"), filters(req))
                    for s in script_sets(m) if kind is None or s.result_type is kind]

    @result.action("read", "GET")
    def read_result(req: Request) -> Any:
        """View a set of results: its id, or current-commissioning, current-testing, current-installation."""
        with store.lock:
            m, ident = machine(req), req.params["id"]
            current = {"current-commissioning": ResultType.COMMISSIONING, "current-testing": ResultType.TESTING,
                       "current-installation": ResultType.INSTALLATION}
            if ident in current:
                found = next((s for s in reversed(script_sets(m)) if s.result_type is current[ident]), None)
            elif ident.isdigit():
                found = next((s for s in script_sets(m) if s.id == int(ident)), None)
            else:
                raise errors.validation(f'Unknown id "{ident}" must be current-commissioning, current-testing, '
                                        "current-installation, or the id number of a specific result.")
            if found is None:
                raise errors.not_found("ScriptSet")
            return _set_json(m, found, req.get_bool("include_output"), filters(req))
