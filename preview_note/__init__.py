"""Merge-request preview notes: `pulumi preview --json` -> Markdown, and posting it to GitLab.

Public API:
    load_preview(path) -> PreviewDigest          parse_preview(text, source) -> PreviewDigest
    StackPreview(stack=..., digest=...)          render_note([StackPreview, ...]) -> str
    NotesClient(api_url, token, project, mr_iid).upsert(key, body) -> Outcome
"""

from preview_note.gitlab_notes import NotesClient, NotesError, Outcome, PostResult, marker_for
from preview_note.model import (
    PreviewDigest,
    PreviewInputError,
    load_event_log,
    load_preview,
    parse_preview,
)
from preview_note.render import StackPreview, render_note

__all__ = [
    "NotesClient",
    "NotesError",
    "Outcome",
    "PostResult",
    "PreviewDigest",
    "PreviewInputError",
    "StackPreview",
    "load_event_log",
    "load_preview",
    "marker_for",
    "parse_preview",
    "render_note",
]
