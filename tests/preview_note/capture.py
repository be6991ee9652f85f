"""Captures the golden notes' inputs from the real Pulumi CLI: `pulumi preview --json` documents, as the CLI
printed them, of real changes to real stacks (the `local` stack against the embedded simulators, after a real
`up`; first previews of `staging` and `prod`), and the policy events of the CLI's `--event-log`.

    .venv/bin/python -m tests.preview_note.capture [case ...]      # all cases when none is named
    GPUAAS_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/preview_note/test_golden.py

The first writes `tests/preview_note/golden/<case>.json` (and `<case>.events.jsonl`, the `policyEvent`
lines of the run's event log, where there are any); the second renders each note into `<case>.md`.
Review both diffs: a capture is a new real run (new ids, ports, timings), so expect churn there.
Nothing is edited in a captured document; the capture fails if one holds a secret value of the world.
`GPUAAS_UPDATE_SHOWCASE=1 pytest tests/preview_note/test_showcase.py` refreshes the docs' example.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from clients.maas import MaasClient
from simulators.localstack import LocalStack
from tests.fixtures.policy import make_policy_venv
from tools.pulumi_cli.api import Engine
from tools.pulumi_cli.results import EngineResult

REPO = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parent / "golden"
PACK = REPO / "policy" / "run-policy-pack"
CI_FLAGS: list[str] = []  # the pipeline's `pulumi preview --json` (tools/pulumi_cli adds --json)
Doc = dict[str, Any]


@dataclass
class Captured:
    preview: Doc
    policy_events: list[str]


@dataclass
class Local:
    """The `local` stack after a real `up`: `change(edit)` previews an edit of its environment document."""

    world: LocalStack
    engine: Engine
    env_file: Path
    declared: str

    def preview(self, edit: Callable[[Doc], None] | None = None, flags: list[str] | None = None,
                pack: bool = False, config: dict[str, str] | None = None) -> Captured:
        """A preview of the edited environment (and stack config), as the pipeline runs it."""
        doc = yaml.safe_load(self.declared)
        if edit is not None:
            edit(doc)
        self.env_file.write_text(yaml.safe_dump(doc, sort_keys=False))
        engine = self.engine
        if config:  # the same stack, its config changed for this run only (the next run writes it back)
            engine = Engine(REPO, engine.stack, engine.backend_dir,
                            config_overrides={**engine.config_overrides, **config})
        try:
            return run_preview(engine, flags or [], pack)
        finally:
            self.env_file.write_text(self.declared)

    def up(self, edit: Callable[[Doc], None]) -> None:
        """Deploy an edited environment: it is what later previews change."""
        doc = yaml.safe_load(self.declared)
        edit(doc)
        self.declared = yaml.safe_dump(doc, sort_keys=False)
        self.env_file.write_text(self.declared)
        result = self.engine.up(timeout=900)
        if not result.ok:
            raise RuntimeError(f"up of the edited local stack failed: {result.errors()}\n{result.log[-3000:]}")


def run_preview(engine: Engine, flags: list[str], pack: bool = False) -> Captured:
    """`pulumi preview --json` as the pipeline runs it; the event log's policy events are kept."""
    handle = engine.start("preview", flags=[*flags, *(["--policy-pack", str(PACK)] if pack else [])])
    handle.popen.wait(timeout=900)
    events = handle.run_dir / "events.jsonl"
    policy = [line for line in (events.read_text().splitlines() if events.exists() else [])
              if '"policyEvent"' in line and "policyEvent" in json.loads(line)]
    result: EngineResult = handle.wait()
    if result.preview is None:
        raise RuntimeError(f"the CLI printed no preview document:\n{result.log[-3000:]}")
    return Captured(result.preview, policy)


@contextmanager
def local_stack() -> Iterator[Local]:
    with LocalStack("local") as world, tempfile.TemporaryDirectory(prefix="capture-") as tmp:
        env_file = Path(tmp) / "local.yaml"
        declared = (REPO / "environments" / "local.yaml").read_text()
        env_file.write_text(declared)
        config = {**world.stack_config(), "gpuaas-infra:environment": str(env_file)}
        engine = Engine(REPO, "local", Path(tmp) / "backend", config_overrides=config)
        up = engine.up(timeout=900)
        if not up.ok:
            raise RuntimeError(f"up of the local stack failed: {up.errors()}\n{up.log[-3000:]}")
        yield Local(world, engine, env_file, declared)


def _machine(doc: Doc, hostname: str) -> Doc:
    return next(m for m in doc["machines"] if m["hostname"] == hostname)


def showcase(doc: Doc) -> None:
    """docs/preview-notes.md's example: a new HWE kernel for the standalone machine and one pool machine
    (both redeploy), and a second Slurm worker on another pool machine."""
    for host in ("local-gpu-1", "local-gpu-3"):
        _machine(doc, host)["hwe_kernel"] = "ga-22.04"
    doc["app_instances"][0]["members"]["worker"] = {"count": 2, "nodes": ["local-gpu-1", "local-gpu-2"]}


def new_hardware(doc: Doc) -> None:
    """Other hardware under two names: new PXE MACs for the standalone machine (a MaasMachine replace, delete
    before replace) and for a pool machine (it leaves and joins as the new hardware, inside the pool's update)."""
    _machine(doc, "local-gpu-1")["pxe_mac"] = "b0:7b:25:20:00:51"
    _machine(doc, "local-gpu-3")["pxe_mac"] = "b0:7b:25:20:00:53"


def in_place(doc: Doc) -> None:
    """Settings each provider applies in place: a profile's batch size and token TTL, the pool's release
    erase mode, the bundle's vendor packages."""
    profile = doc["sites"][0]["profiles"][0]
    profile["batch_max_parallel"] = 1
    profile["enrollment_token_ttl_seconds"] = 1200
    doc["bootstrap_bundles"][0]["vendor_packages"]["runtime"].append("nvidia-dcgm")


def two_workers(doc: Doc) -> None:
    """Deployed before `pool_member_leaves`: the Slurm instance with a second worker, on local-gpu-2."""
    doc["app_instances"][0]["members"]["worker"] = {"count": 2, "nodes": ["local-gpu-1", "local-gpu-2"]}


def pool_member_leaves(doc: Doc) -> None:
    """local-gpu-2 leaves the pool (and the environment); the Slurm worker on it is removed."""
    doc["machines"] = [m for m in doc["machines"] if m["hostname"] != "local-gpu-2"]
    doc["app_instances"][0]["members"]["worker"] = {"count": 1, "nodes": ["local-gpu-1"]}


def app_members(doc: Doc) -> None:
    """The Slurm instance: two workers instead of one."""
    doc["app_instances"][0]["members"]["worker"] = {"count": 2, "nodes": ["local-gpu-1", "local-gpu-3"]}


def deletes(doc: Doc) -> None:
    """The app instance goes, and local-gpu-4 leaves the pool."""
    doc["app_instances"] = []
    doc["machines"] = [m for m in doc["machines"] if m["hostname"] != "local-gpu-4"]


def handoff_site(doc: Doc) -> None:
    """The site turns customer-handoff while its profile still erases: the program's validation refuses
    the environment (the preview fails with the CLI's diagnostics)."""
    doc["sites"][0]["customer_handoff"] = True


# A token put in the stack config in plain text (not `--secret`): a fake, never a credential of the world.
PLAINTEXT_CONFIG = {"gpuaas-infra:platform_token": "glpat-PreviewNoteFakeToken0001"}


def release_by_hand(local: Local) -> None:
    """Drift: local-gpu-2 released in MAAS by hand."""
    assert local.world.maas is not None
    machine = next(m for m in local.world.maas.admin.machines() if m["hostname"] == "local-gpu-2")
    MaasClient(local.world.maas.url, local.world.maas.api_key).release(
        machine["system_id"], erase=False, secure_erase=False, quick_erase=False, force=False)


def capture_local(cases: set[str]) -> dict[str, Captured]:
    out: dict[str, Captured] = {}
    edits: dict[str, tuple[Callable[[Doc], None] | None, list[str], dict[str, str] | None]] = {
        "same_only": (None, CI_FLAGS, None),
        "same_with_sames": (None, ["--show-sames"], None),
        "update": (in_place, CI_FLAGS, None),
        "showcase": (showcase, CI_FLAGS, None),
        "replacement_steps": (new_hardware, ["--show-replacement-steps"], None),
        "app_instance_shape": (app_members, CI_FLAGS, None),
        "delete": (deletes, CI_FLAGS, None),
        "diagnostics": (handoff_site, CI_FLAGS, None),
        "policy_violation": (in_place, CI_FLAGS, PLAINTEXT_CONFIG),
    }
    with local_stack() as local:
        for case, (edit, flags, config) in edits.items():
            if case in cases:  # every preview runs the policy pack, as the pipeline's do
                out[case] = local.preview(edit, flags, pack=True, config=config)
        if cases & {"pool_app_removal", "read_refresh"}:
            local.up(two_workers)
        if "pool_app_removal" in cases:
            out["pool_app_removal"] = local.preview(pool_member_leaves, CI_FLAGS, pack=True)
        if "read_refresh" in cases:
            release_by_hand(local)
            out["read_refresh"] = local.preview(None, ["--refresh"], pack=True)
        secrets = local.world.secret_values()
    for case, captured in out.items():
        text = json.dumps(captured.preview) + "".join(captured.policy_events)
        leaked = [s for s in secrets if s in text]
        if leaked:
            raise RuntimeError(f"{case}: the captured preview holds {len(leaked)} secret value(s) of the world")
    return out


def capture_first_preview(stack: str) -> Captured:
    """A stack's first preview (every resource to create, inputs waiting on others unknown)."""
    with tempfile.TemporaryDirectory(prefix="capture-") as tmp:
        return run_preview(Engine(REPO, stack, Path(tmp) / "backend"), CI_FLAGS, pack=True)


FIRST_PREVIEWS = {"create": "staging", "create_prod": "prod"}
LOCAL_CASES = {"same_only", "same_with_sames", "update", "showcase", "replacement_steps", "app_instance_shape",
               "pool_app_removal", "delete", "diagnostics", "policy_violation", "read_refresh"}
CASES = sorted(set(FIRST_PREVIEWS) | LOCAL_CASES)


def write(case: str, captured: Captured) -> None:
    (GOLDEN / f"{case}.json").write_text(json.dumps(captured.preview, indent=4) + "\n")
    events = GOLDEN / f"{case}.events.jsonl"
    if captured.policy_events:
        events.write_text("\n".join(captured.policy_events) + "\n")
    elif events.exists():
        events.unlink()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cases", nargs="*", help=f"cases to capture (default: all): {', '.join(CASES)}")
    wanted = set(parser.parse_args(argv).cases or CASES)
    if wanted - set(CASES):
        parser.error(f"unknown case(s): {', '.join(sorted(wanted - set(CASES)))}")
    make_policy_venv()  # every capture runs the policy pack, as the pipeline's previews do
    for case, stack in FIRST_PREVIEWS.items():
        if case in wanted:
            write(case, capture_first_preview(stack))
            print(f"captured {case} (first preview of {stack})")
    for case, captured in capture_local(wanted & LOCAL_CASES).items():
        write(case, captured)
        print(f"captured {case} (local stack)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
