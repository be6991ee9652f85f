"""A trivial dynamic provider whose "external system" is a JSON file (the backend).

Importable module, so dill pickles the provider by reference. The backend path comes from stack config
(``engine-fixture:backend``) in ``configure``, which also proves Configure receives the stack config.
Every provider call appends an event, so tests can assert ordering across the whole run.
"""

from __future__ import annotations

import fcntl
import json
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pulumi
from pulumi.dynamic import (
    CheckFailure,
    CheckResult,
    ConfigureRequest,
    CreateResult,
    DiffResult,
    ReadResult,
    Resource,
    ResourceProvider,
    UpdateResult,
)

UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
COMPARED = ("size", "zone", "label", "password", "upstream", "tags")


@contextmanager
def backend(path: Path):
    """Exclusive read-modify-write of the backend file (provider calls run on 4 threads)."""
    lock = path.with_suffix(".lock")
    with open(lock, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        data = json.loads(path.read_text()) if path.exists() else {"objects": {}, "events": []}
        yield data
        tmp = path.with_suffix(".tmp")  # atomic, so tests may read it without the lock
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(path)
        fcntl.flock(fh, fcntl.LOCK_UN)


class WidgetProvider(ResourceProvider):
    def configure(self, req: ConfigureRequest) -> None:
        self.path = Path(req.config.require("backend"))
        self.greeting = req.config.get("greeting")

    def _event(self, op: str, name: str, phase: str) -> None:
        with backend(self.path) as data:
            data["events"].append([op, name, phase, time.monotonic()])

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        failures = []
        size = news.get("size", 0)
        if size != UNKNOWN and (not isinstance(size, int | float) or size < 0):
            failures.append(CheckFailure("size", f"must be a number >= 0, got {size!r}"))
        return CheckResult(news, failures)

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        self._event("diff", str(news.get("name")), "called")  # tests count how often the engine diffs
        changed = [k for k in COMPARED if olds.get(k) != news.get(k)]
        replaces = [k for k in changed if k == "zone" or (k == "upstream" and news.get("pinned_upstream"))]
        return DiffResult(changes=bool(changed), replaces=replaces, delete_before_replace=bool(news.get("exclusive")))

    def _outputs(self, id_: str, props: dict[str, Any]) -> dict[str, Any]:
        outs = {k: v for k, v in props.items() if k != "__provider"}
        outs["widget_id"] = id_
        outs["token"] = f"tok-{id_}-{props.get('name')}"  # a secret output (additional_secret_outputs)
        outs["greeting"] = self.greeting
        return outs

    def create(self, props: dict[str, Any]) -> CreateResult:
        name = props["name"]
        print(f"creating widget {name}", flush=True)
        if props.get("stderr_note"):
            print(props["stderr_note"], file=sys.stderr, flush=True)
        self._event("create", name, "start")
        time.sleep(float(props.get("delay", 0)))  # widens ordering races on purpose
        if props.get("leak_password"):  # a careless provider: its message and output carry the secret
            print(f"using password {props.get('password')}", flush=True)
            raise RuntimeError(f"login refused for password {props.get('password')}")
        if props.get("fail_create_lines"):  # a long failure report, e.g. a pool's per-machine lines
            count = int(props["fail_create_lines"])
            lines = [f"machine gpu-{i:03d}: stage deploy failed: " + "x" * 180 for i in range(count)]
            raise RuntimeError("\n".join(lines))
        if props.get("fail_create"):
            self._event("create", name, "failed")
            raise RuntimeError(f"widget quota exceeded in zone {props.get('zone')}")
        id_ = f"w-{uuid.uuid4().hex[:8]}"
        outs = self._outputs(id_, props)
        with backend(self.path) as data:
            data["objects"][id_] = {k: v for k, v in outs.items() if k != "token"}
        self._event("create", name, "done")
        return CreateResult(id_, outs)

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        self._event("update", news["name"], "start")
        outs = self._outputs(id_, news)
        with backend(self.path) as data:
            data["objects"][id_] = {k: v for k, v in outs.items() if k != "token"}
        self._event("update", news["name"], "done")
        return UpdateResult(outs)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        with backend(self.path) as data:
            obj = data["objects"].get(id_)
        if obj is None:
            return ReadResult("", {})
        # observed_at changes on every read but is no input: the provider's diff ignores it, so it is no drift.
        return ReadResult(id_, {**obj, "token": props.get("token"), "observed_at": time.time()})

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        self._event("delete", props["name"], "start")
        time.sleep(float(props.get("delay", 0)))
        if props.get("fail_delete"):
            raise RuntimeError(f"widget {props['name']} is busy")
        with backend(self.path) as data:
            data["objects"].pop(id_, None)
        self._event("delete", props["name"], "done")


class Widget(Resource, module="fixture", name="Widget"):
    widget_id: pulumi.Output[str]
    token: pulumi.Output[str]
    size: pulumi.Output[float]

    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(
            WidgetProvider(), name, {"name": name, "widget_id": None, "token": None, "size": None, **props}, opts
        )


class Group(pulumi.ComponentResource):
    def __init__(self, name: str, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("fixture:index:Group", name, None, opts)
        self.register_outputs({"name": name})
