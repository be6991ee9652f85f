"""`gpuaas-infra preview-note` / `post-note` through the console-script entry point."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cli.main import COMMANDS, main, resolve
from tests.preview_note.conftest import GOLDEN, MR_IID, PROJECT, WRITE_TOKEN
from tests.preview_note.gitlab_server import FakeGitLab


def test_usage_lists_every_registered_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in COMMANDS:
        assert name in out
        assert callable(resolve(name))
    assert main(["no-such-command"]) == 2


def test_preview_note_writes_file(tmp_path: Path) -> None:
    out = tmp_path / "note.md"
    rc = main(["preview-note", "--stack", f"local={GOLDEN / 'showcase.json'}", "--out", str(out)])
    assert rc == 0
    assert out.read_text() == (GOLDEN / "showcase.md").read_text()


def test_preview_note_with_the_clis_event_log(tmp_path: Path) -> None:
    """The pipeline's two files, both from the real CLI: the `--json` document and the `--event-log`."""
    out = tmp_path / "note.md"
    rc = main(["preview-note", f"local={GOLDEN / 'policy_violation.json'}",
               "--event-log", f"local={GOLDEN / 'policy_violation.events.jsonl'}", "--out", str(out)])
    assert rc == 0
    assert out.read_text() == (GOLDEN / "policy_violation.md").read_text()
    assert ("- **mandatory** `no-plaintext-secrets` (gpuaas-policies@0.1.0) on pulumi-python `default`"
            in out.read_text())


def test_preview_note_with_event_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "events.jsonl"
    log.write_text(
        json.dumps(
            {
                "policyEvent": {
                    "resourceUrn": "urn:pulumi:dev::gpuaas-infra::pulumi-python:dynamic/gpuaas:MaasMachine::dev-gpu-1",
                    "message": "machines in prod must be protected",
                    "policyName": "prod-machines-protected",
                    "policyPackName": "gpuaas-policies",
                    "enforcementLevel": "mandatory",
                }
            }
        )
        + "\n"
    )
    rc = main(["preview-note", f"dev={GOLDEN / 'same_only.json'}", "--event-log", f"dev={log}"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "**1 mandatory policy violation(s)**" in out
    assert "- **mandatory** `prod-machines-protected` (gpuaas-policies) on MaasMachine `dev-gpu-1`" in out


def test_preview_note_bad_file_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "preview-dev.json"
    bad.write_text("Previewing update (dev):\n")
    assert main(["preview-note", f"dev={bad}"]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "not JSON" in err
    assert main(["preview-note", f"dev={tmp_path / 'missing.json'}"]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert main(["preview-note", str(GOLDEN / "create.json"), "--event-log", f"prod={bad}"]) == 2
    assert "name one of the stacks: create" in capsys.readouterr().err


def test_post_note_from_ci_variables(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fake_gitlab: FakeGitLab,
    capsys: pytest.CaptureFixture[str],
) -> None:
    note = tmp_path / "note-dev.md"
    shutil.copy(GOLDEN / "showcase.md", note)
    monkeypatch.setenv("CI_API_V4_URL", fake_gitlab.url)
    monkeypatch.setenv("CI_PROJECT_ID", PROJECT)
    monkeypatch.setenv("CI_MERGE_REQUEST_IID", str(MR_IID))
    monkeypatch.setenv("GPUAAS_NOTES_TOKEN", WRITE_TOKEN)
    assert main(["post-note", "--key", "dev", "--note", str(note)]) == 0
    assert main(["post-note", "--key", "dev", "--note", str(note)]) == 0
    out = capsys.readouterr().out
    assert "created note" in out and "unchanged note" in out
    [posted] = fake_gitlab.state.notes[(PROJECT, MR_IID)]
    assert posted["body"].endswith(note.read_text())


def test_post_note_outside_an_mr_pipeline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for var in ("CI_API_V4_URL", "CI_PROJECT_ID", "CI_MERGE_REQUEST_IID"):
        monkeypatch.delenv(var, raising=False)
    rc = main(
        [
            "post-note",
            "--key",
            "dev",
            "--note",
            str(tmp_path / "n.md"),
            "--api-url",
            "http://127.0.0.1:9/api/v4",
            "--project",
            "1",
        ]
    )
    assert rc == 1
    assert "CI_MERGE_REQUEST_IID" in capsys.readouterr().err


def test_post_note_bad_token_exit_code(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fake_gitlab: FakeGitLab,
    capsys: pytest.CaptureFixture[str],
) -> None:
    note = tmp_path / "n.md"
    note.write_text("x")
    monkeypatch.setenv("GPUAAS_NOTES_TOKEN", "wrong-token-value")
    rc = main(
        [
            "post-note",
            "--key",
            "dev",
            "--note",
            str(note),
            "--api-url",
            fake_gitlab.url,
            "--project",
            PROJECT,
            "--mr-iid",
            str(MR_IID),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 1 and "401" in err and "wrong-token-value" not in err
