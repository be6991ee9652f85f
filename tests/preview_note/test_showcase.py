"""The showcase note in docs/preview-notes.md comes from a real engine run of the local stack (embedded
MAAS and platform simulators) and is kept in sync here: the test reruns the change and compares.
`GPUAAS_UPDATE_SHOWCASE=1` rewrites the block in the doc instead (then review the diff)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from preview_note import StackPreview, parse_preview, render_note
from simulators.localstack import LocalStack

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "preview-notes.md"
BLOCK = re.compile(r"(<!-- showcase:begin -->\n````markdown\n)(.*?)(````\n<!-- showcase:end -->)", re.S)


@pytest.fixture
def world() -> Iterator[LocalStack]:
    with LocalStack("local") as w:
        yield w


def the_change(doc: dict[str, Any]) -> None:
    """A new HWE kernel for the standalone machine and one pool machine (both redeploy), and a second
    Slurm worker on another pool machine."""
    for machine in doc["machines"]:
        if machine["hostname"] in ("local-gpu-1", "local-gpu-3"):
            machine["hwe_kernel"] = "ga-22.04"
    doc["app_instances"][0]["members"]["worker"] = {"count": 2, "nodes": ["local-gpu-1", "local-gpu-2"]}


def test_the_showcase_note_is_what_the_engine_produces(engine_factory: Any, world: LocalStack, tmp_path: Path) -> None:
    env_file = tmp_path / "local.yaml"
    env_file.write_text((REPO / "environments" / "local.yaml").read_text())
    cfg = world.stack_config()
    cfg["gpuaas-infra:environment"] = str(env_file)
    engine = engine_factory(REPO, "local", config=cfg, backend=tmp_path / "backend")
    up = engine.up(timeout=600)
    assert up.ok, up.errors()
    doc = yaml.safe_load(env_file.read_text())
    the_change(doc)
    env_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    preview = engine.preview(timeout=600)
    assert preview.ok, preview.errors()
    note = render_note(
        [StackPreview(stack="local", digest=parse_preview(json.dumps(preview.preview_digest()), "engine preview"))]
    )
    text = DOC.read_text()
    match = BLOCK.search(text)
    assert match, "docs/preview-notes.md lost its <!-- showcase:begin/end --> block"
    if os.environ.get("GPUAAS_UPDATE_SHOWCASE"):
        DOC.write_text(text[: match.start(2)] + note.rstrip("\n") + "\n" + text[match.end(2) :])
        return
    assert match.group(2).rstrip("\n") == note.rstrip("\n"), (
        "the showcase in docs/preview-notes.md is out of date; rerun with GPUAAS_UPDATE_SHOWCASE=1 and review:\n"
        + note
    )
