"""Fixtures: golden preview files and a local GitLab notes server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.preview_note.gitlab_server import FakeGitLab

GOLDEN = Path(__file__).parent / "golden"
PROJECT = "4242"
MR_IID = 7
WRITE_TOKEN = "writer-token-for-tests-only"
READ_TOKEN = "reader-token-for-tests-only"
BOT = {"id": 4242001, "username": "project_4242_bot_preview"}  # the write token's user


@pytest.fixture
def golden_dir() -> Path:
    return GOLDEN


@pytest.fixture
def fake_gitlab() -> Iterator[FakeGitLab]:
    """A notes server on 127.0.0.1 with project 4242, MR !7 (empty) and a write and a read token."""
    with FakeGitLab() as gl:
        gl.state.tokens = {WRITE_TOKEN: "write", READ_TOKEN: "read"}
        gl.state.users = {WRITE_TOKEN: BOT, READ_TOKEN: {"id": 4242002, "username": "project_4242_bot_reader"}}
        gl.state.notes[(PROJECT, MR_IID)] = []
        yield gl
