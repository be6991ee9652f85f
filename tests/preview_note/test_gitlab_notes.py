"""The notes client against a local server implementing GitLab's notes contract."""

from __future__ import annotations

import pytest

from preview_note import NotesClient, NotesError, PostResult, marker_for
from tests.preview_note.conftest import BOT, MR_IID, PROJECT, READ_TOKEN, WRITE_TOKEN
from tests.preview_note.gitlab_server import FakeGitLab


def _client(gl: FakeGitLab, token: str = WRITE_TOKEN, project: str = PROJECT, iid: int = MR_IID) -> NotesClient:
    return NotesClient(gl.url, token, project, iid, retry_wait=0.01)


def _notes(gl: FakeGitLab) -> list[dict]:
    return gl.state.notes[(PROJECT, MR_IID)]


def test_first_post_creates_then_updates_the_same_note(fake_gitlab: FakeGitLab) -> None:
    with _client(fake_gitlab) as c:
        first = c.upsert("dev", "## Pulumi preview\n\none\n")
        second = c.upsert("dev", "## Pulumi preview\n\ntwo\n")
        third = c.upsert("dev", "## Pulumi preview\n\ntwo\n")
    assert first.result is PostResult.CREATED
    assert second.result is PostResult.UPDATED and second.note_id == first.note_id
    assert third.result is PostResult.UNCHANGED and third.note_id == first.note_id
    notes = _notes(fake_gitlab)
    assert len(notes) == 1
    assert notes[0]["body"] == f"{marker_for('dev')}\n## Pulumi preview\n\ntwo\n"
    assert [m for m, _ in fake_gitlab.state.requests].count("POST") == 1


def test_one_note_per_stack(fake_gitlab: FakeGitLab) -> None:
    with _client(fake_gitlab) as c:
        ids = {stack: c.upsert(stack, f"note for {stack}").note_id for stack in ("dev", "staging", "prod")}
        again = c.upsert("staging", "note for staging, second preview")
    assert len(set(ids.values())) == 3
    assert again.note_id == ids["staging"] and again.result is PostResult.UPDATED
    bodies = {n["id"]: n["body"] for n in _notes(fake_gitlab)}
    assert bodies[ids["dev"]].endswith("note for dev")
    assert bodies[ids["staging"]].endswith("second preview")


def test_marker_found_past_the_first_page(fake_gitlab: FakeGitLab) -> None:
    for i in range(150):
        fake_gitlab.state.add_note(PROJECT, MR_IID, f"review comment {i}")
    note_id = fake_gitlab.state.add_note(PROJECT, MR_IID, f"{marker_for('prod')}\nold note", author=BOT)
    for i in range(60):
        fake_gitlab.state.add_note(PROJECT, MR_IID, f"later comment {i}")
    with _client(fake_gitlab) as c:
        assert len(c.list_notes()) == 211
        out = c.upsert("prod", "new note")
    assert out.result is PostResult.UPDATED and out.note_id == note_id
    gets = [p for m, p in fake_gitlab.state.requests if m == "GET" and "/notes" in p]
    assert any("page=3" in p for p in gets) and all("per_page=100" in p for p in gets)
    assert len(_notes(fake_gitlab)) == 211


def test_marker_quoted_by_a_person_or_system_note_is_not_taken(fake_gitlab: FakeGitLab) -> None:
    fake_gitlab.state.add_note(PROJECT, MR_IID, f"> {marker_for('dev')}\n> quoting the bot")
    fake_gitlab.state.add_note(PROJECT, MR_IID, f"{marker_for('dev')} mentioned", system=True)
    with _client(fake_gitlab) as c:
        out = c.upsert("dev", "fresh")
    assert out.result is PostResult.CREATED
    assert len(_notes(fake_gitlab)) == 3


def test_a_persons_note_with_the_marker_is_never_overwritten(fake_gitlab: FakeGitLab) -> None:
    copied = fake_gitlab.state.add_note(PROJECT, MR_IID, f"{marker_for('dev')}\nmy own copy, please keep")
    with _client(fake_gitlab) as c:
        out = c.upsert("dev", "the bot's note")
    assert out.result is PostResult.CREATED and out.note_id != copied
    notes = {n["id"]: n for n in _notes(fake_gitlab)}
    assert notes[copied]["body"].endswith("please keep")
    assert notes[out.note_id]["author"] == BOT


def test_duplicates_from_earlier_runs_are_reported_and_the_oldest_updated(fake_gitlab: FakeGitLab) -> None:
    first = fake_gitlab.state.add_note(PROJECT, MR_IID, f"{marker_for('dev')}\na", author=BOT)
    fake_gitlab.state.add_note(PROJECT, MR_IID, f"{marker_for('dev')}\nb", author=BOT)
    with _client(fake_gitlab) as c:
        out = c.upsert("dev", "c")
    assert (out.result, out.note_id, out.duplicates) == (PostResult.UPDATED, first, 1)


def test_project_path_is_url_encoded(fake_gitlab: FakeGitLab) -> None:
    fake_gitlab.state.notes[("infra/gpuaas-infra", 3)] = []
    with _client(fake_gitlab, project="infra/gpuaas-infra", iid=3) as c:
        assert c.upsert("dev", "x").result is PostResult.CREATED
    assert any("/projects/infra%2Fgpuaas-infra/" in p for _, p in fake_gitlab.state.requests)


def _error(gl: FakeGitLab, **kw: object) -> str:
    with pytest.raises(NotesError) as exc, _client(gl, **kw) as c:  # type: ignore[arg-type]
        c.upsert("dev", "body")
    return str(exc.value)


def test_401_names_the_token_variable_and_not_the_token(fake_gitlab: FakeGitLab) -> None:
    msg = _error(fake_gitlab, token="expired-token-value")
    assert "401" in msg and "GPUAAS_NOTES_TOKEN" in msg and "api` scope" in msg
    assert "expired-token-value" not in msg


def test_403_read_only_token_says_which_role_is_needed(fake_gitlab: FakeGitLab) -> None:
    msg = _error(fake_gitlab, token=READ_TOKEN)
    assert "403" in msg and "create a note" in msg and "Reporter" in msg
    assert READ_TOKEN not in msg
    assert _notes(fake_gitlab) == []


def test_403_on_update(fake_gitlab: FakeGitLab) -> None:
    fake_gitlab.state.add_note(PROJECT, MR_IID, f"{marker_for('dev')}\nold", author=fake_gitlab.state.users[READ_TOKEN])
    msg = _error(fake_gitlab, token=READ_TOKEN)
    assert "403" in msg and "update a note" in msg


def test_404_names_project_and_merge_request(fake_gitlab: FakeGitLab) -> None:
    msg = _error(fake_gitlab, iid=99)
    assert "404" in msg and "!99" in msg and f"project {PROJECT}" in msg and "CI_MERGE_REQUEST_IID" in msg


def test_missing_token_fails_before_any_request(fake_gitlab: FakeGitLab) -> None:
    with pytest.raises(NotesError, match="GPUAAS_NOTES_TOKEN"):
        NotesClient(fake_gitlab.url, "", PROJECT, MR_IID)
    assert fake_gitlab.state.requests == []


def test_transient_get_is_retried_but_post_is_not(fake_gitlab: FakeGitLab) -> None:
    fake_gitlab.state.fail_next = [503]
    with _client(fake_gitlab) as c:
        assert c.upsert("dev", "x").result is PostResult.CREATED
    # /user answered 503 once and was retried; then the notes list; then one POST.
    assert [(m, p.split("?")[0].rsplit("/", 1)[-1]) for m, p in fake_gitlab.state.requests] == [
        ("GET", "user"),
        ("GET", "user"),
        ("GET", "notes"),
        ("POST", "notes"),
    ]
    fake_gitlab.state.requests.clear()
    with _client(fake_gitlab) as c:
        c.list_notes()
        fake_gitlab.state.fail_next = [503]
        with pytest.raises(NotesError, match="503"):
            c.create_note("y")
    assert [m for m, _ in fake_gitlab.state.requests] == ["GET", "POST"]
    assert len(_notes(fake_gitlab)) == 1


def test_unreachable_gitlab_is_a_clear_error() -> None:
    with FakeGitLab() as gl:
        url = gl.url
    with (
        pytest.raises(NotesError, match="cannot reach GitLab"),
        NotesClient(url, "t", "1", 1, retry_wait=0.01) as c,
    ):
        c.list_notes()


def test_bad_key_is_refused() -> None:
    with pytest.raises(NotesError, match="marker"):
        marker_for("dev -->")
