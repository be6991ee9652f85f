"""Per-script results of commissioning and testing runs, and the API that reads them: canonical/maas
`maasserver/api/scriptresults.py` (after MAAS 2.2; `urls_api.py`: `nodes/{system_id}/results/` and
`nodes/{system_id}/results/{id}/`), `metadataserver/enum.py` (RESULT_TYPE, SCRIPT_STATUS).

Each commissioning and testing run of a machine records one script set: one result per script it ran
(the requested scripts, else MAAS's defaults). On the FAST backend (timers) the set is recorded when the
phase ends: passed, or failed with exit status 1 when a fault is injected
(`MachineFaults.commissioning_failures` / `testing_failures`: the failing script is named in the machine's
error description). On the NSPAWN backend the set is opened Pending when the commission starts (`open_run`,
as MAAS's `ScriptSet.objects.create_commissioning_script_set`) and each result is stored from what the
node's script runner signals (`store_result`: its exit status, combined output, stdout and stderr;
commissioning.py)."""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from clients.maas import ScriptStatus  # MAAS's SCRIPT_STATUS: one copy

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
    started: float | None
    ended: float | None
    output: bytes = b""
    """The combined output (stdout and stderr as they came)."""
    stdout: bytes = b""
    stderr: bytes = b""
    script_id: int | None = None
    runtime: float | None = None


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
                                        started, now, out, stdout=out))
    script_sets(m).append(run)


def open_run(store: Store, m: Machine, kind: ResultType, scripts: list[tuple[str, int | None]]) -> ScriptSet:
    """A new run whose results (name, script id) are Pending until the node reports them."""
    run = ScriptSet(store.next_id("script_set"), kind, time.time())
    run.results = [ScriptResult(store.next_id("script_result"), name, ScriptStatus.PENDING, None, None, None,
                                script_id=script_id) for name, script_id in scripts]
    script_sets(m).append(run)
    return run


def current(m: Machine, kind: ResultType) -> ScriptSet | None:
    """The machine's newest run of this kind (MAAS's current_<kind>_script_set)."""
    return next((s for s in reversed(script_sets(m)) if s.result_type is kind), None)


def find(run: ScriptSet, result_id: int | None, name: str | None) -> ScriptResult | None:
    """A result of the run by id, else by script name (MAAS's ScriptSet.find_script_result)."""
    if result_id is not None:
        found = next((r for r in run.results if r.id == result_id), None)
        if found is not None:
            return found
    return next((r for r in run.results if name is not None and r.name == name), None)


def mark_running(r: ScriptResult) -> None:
    if r.status is ScriptStatus.PENDING:
        r.status, r.started = ScriptStatus.RUNNING, time.time()


def store_result(r: ScriptResult, exit_status: int, files: dict[str, bytes], runtime: float | None,
                 timedout: bool) -> None:
    """What the node sent for one script: its exit status decides Passed/Failed (Timed out when the runner
    said so), `files` its output by kind ("output" combined, "stdout", "stderr"), as MAAS's store_result."""
    now = time.time()
    r.exit_status, r.runtime, r.ended = exit_status, runtime, now
    r.started = r.started if r.started is not None else now - (runtime or 0.0)
    r.output = files.get("output", r.output)
    r.stdout, r.stderr = files.get("stdout", r.stdout), files.get("stderr", r.stderr)
    r.status = ScriptStatus.TIMEDOUT if timedout else ScriptStatus.PASSED if exit_status == 0 else ScriptStatus.FAILED


def abort_open(m: Machine) -> None:
    """A failed or aborted commission: every result still Pending or Running is Aborted (as MAAS)."""
    for run in script_sets(m):
        for r in run.results:
            if r.status in (ScriptStatus.PENDING, ScriptStatus.RUNNING):
                r.status, r.ended = ScriptStatus.ABORTED, time.time()


def run_names(kind: ResultType, requested: list[str]) -> list[str]:
    wanted = [n for n in requested if n and n != "none"]
    if kind is ResultType.COMMISSIONING:
        return DEFAULT_COMMISSIONING + [n for n in wanted if n not in DEFAULT_COMMISSIONING]
    return wanted or list(DEFAULT_TESTING)


def _time(ts: float | None) -> str | None:
    return None if ts is None else format_datetime(datetime.fromtimestamp(ts, UTC))


def _runtime(r: ScriptResult) -> str:
    """MAAS's `runtime`: str(timedelta) of whole seconds, "" before the script ran."""
    if r.runtime is not None:
        return str(timedelta(seconds=int(r.runtime)))
    if r.started is None or r.ended is None:
        return ""
    return str(timedelta(seconds=int(r.ended - r.started)))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _set_json(m: Machine, s: ScriptSet, include_output: bool, filters: list[str] | None) -> dict[str, Any]:
    results = []
    for r in sorted(s.results, key=lambda r: r.name):
        if filters is not None and not any(f == r.name or (f.isdigit() and int(f) == r.id) for f in filters):
            continue
        item: dict[str, Any] = {
            "id": r.id, "created": _time(r.started or s.last_ping),
            "updated": _time(r.ended or r.started or s.last_ping), "name": r.name,
            "status": int(r.status), "status_name": STATUS_NAMES[r.status],
            "exit_status": r.exit_status, "started": _time(r.started), "ended": _time(r.ended),
            "runtime": _runtime(r), "script_id": r.script_id, "script_revision_id": None,
        }
        if include_output:
            item |= {"output": _b64(r.output), "stdout": _b64(r.stdout), "stderr": _b64(r.stderr), "result": ""}
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
