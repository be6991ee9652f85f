"""GitLab merge-request notes: one note per MR and key (stack), found by an HTML-comment marker.

Only the notes endpoints are used (GET list with X-Next-Page pagination, POST, PUT), with a
project access token in the PRIVATE-TOKEN header. GET and PUT are retried on transient failures;
POST is not (a retried POST whose first attempt landed would duplicate the note).
"""

from __future__ import annotations

import re
from enum import StrEnum
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ConfigDict
from tenacity import retry, retry_if_exception, stop_after_attempt, wait_exponential

# GitLab rejects note bodies over 1,000,000 characters; keep clear of it with room for the marker.
MAX_BODY = 999_000
PER_PAGE = 100
MAX_PAGES = 100  # 10,000 notes: far past any real MR, and it bounds the loop
_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,99}$")
_TRANSIENT = frozenset({429, 502, 503, 504})


class NotesError(RuntimeError):
    """A notes API failure, with what to do about it. Never contains the token."""


class PostResult(StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"


class Author(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    id: int
    username: str = ""


class Note(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    id: int
    body: str = ""
    system: bool = False
    author: Author | None = None


class Outcome(BaseModel):
    model_config = ConfigDict(frozen=True)

    result: PostResult
    note_id: int
    duplicates: int = 0  # other notes carrying the same marker (left alone, reported)


def marker_for(key: str) -> str:
    if not _KEY.match(key):
        raise NotesError(f"note key {key!r} is not usable in a marker: use letters, digits and _.:/- only")
    return f"<!-- gpuaas-infra:preview-note key={key} -->"


def with_marker(key: str, body: str) -> str:
    marker = marker_for(key)
    if len(body) > MAX_BODY:
        body = (
            body[:MAX_BODY] + "\n\n*(note truncated: GitLab limits notes to 1,000,000 characters; "
            "see the preview artifact of this job for the rest)*\n"
        )
    return f"{marker}\n{body}"


class _Transient(Exception):
    pass


def _is_transient(exc: BaseException) -> bool:
    return isinstance(exc, _Transient | httpx.TransportError)


class NotesClient:
    """Notes of one merge request. `api_url` is GitLab's `/api/v4` root (CI_API_V4_URL)."""

    def __init__(
        self,
        api_url: str,
        token: str,
        project: str,
        mr_iid: int,
        *,
        token_env: str = "GPUAAS_NOTES_TOKEN",
        timeout: float = 15.0,
        retry_wait: float = 0.5,
    ) -> None:
        if not token:
            raise NotesError(
                f"no GitLab token: set the masked CI variable {token_env} to a project access "
                "token with the `api` scope (Reporter role or higher)"
            )
        self._project, self._iid, self._token_env = project, mr_iid, token_env
        self._retry_wait = retry_wait
        base = api_url.rstrip("/")
        self._path = f"/projects/{quote(str(project), safe='')}/merge_requests/{mr_iid}/notes"
        self._http = httpx.Client(base_url=base, headers={"PRIVATE-TOKEN": token}, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> NotesClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- errors -------------------------------------------------------------------------------
    def _fail(self, resp: httpx.Response, doing: str) -> NotesError:
        try:
            payload = resp.json()
            detail = payload.get("message") or payload.get("error") if isinstance(payload, dict) else payload
        except ValueError:
            detail = resp.text[:200]
        where = f"merge request !{self._iid} of project {self._project}"
        if resp.status_code == 401:
            hint = (
                f"the token in {self._token_env} is missing, wrong, revoked or expired; create a project "
                f"access token with the `api` scope and store it as the masked CI variable {self._token_env}"
            )
        elif resp.status_code == 403:
            hint = (
                f"the token is valid but may not {doing} on {where}; give the project access token the "
                "`api` scope and at least the Reporter role (a locked discussion also refuses notes)"
            )
        elif resp.status_code == 404:
            hint = (
                f"{where} does not exist or is not visible to the token; check CI_PROJECT_ID and "
                "CI_MERGE_REQUEST_IID (post-note must run in a merge-request pipeline)"
            )
        else:
            hint = "GitLab refused the request; see its message"
        return NotesError(
            f"GitLab notes API: {resp.status_code} {resp.reason_phrase} while trying to {doing} ({detail!s}): {hint}"
        )

    def _send(self, method: str, url: str, doing: str, *, retry_ok: bool, **kw: object) -> httpx.Response:
        def once() -> httpx.Response:
            resp = self._http.request(method, url, **kw)  # type: ignore[arg-type]
            if resp.status_code in _TRANSIENT and retry_ok:
                raise _Transient(f"{resp.status_code}")
            return resp

        if retry_ok:
            once = retry(
                retry=retry_if_exception(_is_transient),
                stop=stop_after_attempt(3),
                reraise=True,
                wait=wait_exponential(multiplier=self._retry_wait, max=4 * self._retry_wait),
            )(once)
        try:
            resp = once()
        except _Transient as exc:
            raise NotesError(
                f"GitLab notes API kept answering {exc} while trying to {doing}; "
                "GitLab is overloaded or down, re-run the job later"
            ) from None
        except httpx.TransportError as exc:
            raise NotesError(
                f"cannot reach GitLab at {self._http.base_url} to {doing}: "
                f"{type(exc).__name__}; check CI_API_V4_URL and the runner's network"
            ) from None
        if resp.status_code >= 400:
            raise self._fail(resp, doing)
        return resp

    # -- API ----------------------------------------------------------------------------------
    def list_notes(self) -> list[Note]:
        notes: list[Note] = []
        page: str | None = "1"
        for _ in range(MAX_PAGES):
            if not page:
                return notes
            resp = self._send(
                "GET",
                self._path,
                "list notes",
                retry_ok=True,
                params={"per_page": PER_PAGE, "page": page, "sort": "asc", "order_by": "created_at"},
            )
            notes += [Note.model_validate(n) for n in resp.json()]
            page = resp.headers.get("X-Next-Page", "").strip() or None
        raise NotesError(f"more than {MAX_PAGES * PER_PAGE} notes on merge request !{self._iid}; refusing to page on")

    def create_note(self, body: str) -> Note:
        resp = self._send("POST", self._path, "create a note", retry_ok=False, json={"body": body})
        return Note.model_validate(resp.json())

    def update_note(self, note_id: int, body: str) -> Note:
        resp = self._send("PUT", f"{self._path}/{note_id}", "update a note", retry_ok=True, json={"body": body})
        return Note.model_validate(resp.json())

    def whoami(self) -> Author:
        """The token's own user (a project access token acts as the project's bot user)."""
        return Author.model_validate(self._send("GET", "/user", "identify the token's user", retry_ok=True).json())

    def upsert(self, key: str, body: str) -> Outcome:
        """Create the note for `key`, or update the one this token's user wrote with its marker.

        Only the bot's own notes are candidates: a person's note that starts with the marker (a
        quote, a copy) is never overwritten.
        """
        full = with_marker(key, body)
        marker = marker_for(key)
        me = self.whoami().id
        mine = [
            n
            for n in self.list_notes()
            if not n.system and n.body.startswith(marker) and n.author is not None and n.author.id == me
        ]
        if not mine:
            return Outcome(result=PostResult.CREATED, note_id=self.create_note(full).id)
        first = mine[0]
        if first.body == full:
            return Outcome(result=PostResult.UNCHANGED, note_id=first.id, duplicates=len(mine) - 1)
        return Outcome(result=PostResult.UPDATED, note_id=self.update_note(first.id, full).id, duplicates=len(mine) - 1)
