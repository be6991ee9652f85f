"""`gpuaas-infra preview-note` and `gpuaas-infra post-note`."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from preview_note.gitlab_notes import NotesClient, NotesError
from preview_note.model import PreviewInputError, load_event_log, load_preview
from preview_note.render import StackPreview, render_note


def _named(spec: str, option: str) -> tuple[str | None, Path]:
    name, sep, path = spec.partition("=")
    if sep and name and path:
        return name, Path(path)
    if sep:
        raise PreviewInputError(f"{option} {spec!r}: expected NAME=PATH (for example dev=preview-dev.json)")
    return None, Path(spec)


def preview_note_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="gpuaas-infra preview-note",
        description="Render `pulumi preview --json` output of one or more stacks as a Markdown note.",
    )
    parser.add_argument(
        "previews",
        nargs="*",
        metavar="[STACK=]PREVIEW.json",
        help="a preview file; the stack name defaults to the file name without .json",
    )
    parser.add_argument(
        "--stack",
        action="append",
        default=[],
        metavar="STACK=PREVIEW.json",
        help="a stack and its preview file (repeatable)",
    )
    parser.add_argument(
        "--event-log",
        action="append",
        default=[],
        metavar="STACK=EVENTS.jsonl",
        help="`pulumi preview --event-log` file of a stack: adds its policy violations",
    )
    parser.add_argument("--out", type=Path, help="write the note here (default: stdout)")
    parser.add_argument("--title", default="Pulumi preview", help="the note's heading")
    args = parser.parse_args(argv)
    specs = args.stack + args.previews
    if not specs:
        parser.error("give at least one preview file (STACK=PREVIEW.json)")
    try:
        stacks: list[StackPreview] = []
        for spec in specs:
            name, path = _named(spec, "--stack")
            digest = load_preview(path)
            stacks.append(StackPreview(stack=name or path.name.removesuffix(".json"), digest=digest))
        by_name = {s.stack: s for s in stacks}
        for spec in args.event_log:
            name, path = _named(spec, "--event-log")
            if name is None or name not in by_name:
                raise PreviewInputError(f"--event-log {spec!r}: name one of the stacks: {', '.join(by_name)}")
            sp = by_name[name]
            merged = sp.digest.model_copy(
                update={"policy_violations": sp.digest.policy_violations + load_event_log(path)}
            )
            by_name[name] = StackPreview(stack=name, digest=merged)
        note = render_note([by_name[s.stack] for s in stacks], title=args.title)
    except PreviewInputError as exc:
        print(f"preview-note: {exc}", file=sys.stderr)
        return 2
    if args.out:
        args.out.write_text(note, encoding="utf-8")
    else:
        sys.stdout.write(note)
    return 0


def _env_int(value: str | None, what: str) -> int:
    try:
        return int(value or "")
    except ValueError:
        raise NotesError(f"{what} must be a merge-request IID (a number), got {value!r}") from None


def post_note_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="gpuaas-infra post-note",
        description="Create or update the one note of a merge request for KEY (usually the stack name).",
    )
    parser.add_argument("--note", type=Path, required=True, help="the Markdown note (from preview-note)")
    parser.add_argument("--key", required=True, help="which note of the MR to create or update (e.g. dev)")
    parser.add_argument(
        "--api-url", default=os.environ.get("CI_API_V4_URL"), help="GitLab API root (default: $CI_API_V4_URL)"
    )
    parser.add_argument(
        "--project",
        default=os.environ.get("CI_PROJECT_ID"),
        help="project id or path (default: $CI_PROJECT_ID)",
    )
    parser.add_argument(
        "--mr-iid",
        default=os.environ.get("CI_MERGE_REQUEST_IID"),
        help="merge request IID (default: $CI_MERGE_REQUEST_IID)",
    )
    parser.add_argument(
        "--token-env",
        default="GPUAAS_NOTES_TOKEN",
        help="environment variable holding the project access token (default: GPUAAS_NOTES_TOKEN)",
    )
    args = parser.parse_args(argv)
    try:
        if not args.api_url:
            raise NotesError("no GitLab API URL: pass --api-url or run in GitLab CI (CI_API_V4_URL)")
        if not args.project:
            raise NotesError("no project: pass --project or run in GitLab CI (CI_PROJECT_ID)")
        if not args.mr_iid:
            raise NotesError(
                "no merge request: pass --mr-iid or run in a merge-request pipeline "
                "(CI_MERGE_REQUEST_IID is only set there)"
            )
        iid = _env_int(args.mr_iid, "--mr-iid / CI_MERGE_REQUEST_IID")
        try:
            body = args.note.read_text(encoding="utf-8")
        except OSError as exc:
            raise NotesError(f"{args.note}: cannot read the note ({exc.strerror})") from None
        with NotesClient(
            args.api_url, os.environ.get(args.token_env, ""), str(args.project), iid, token_env=args.token_env
        ) as client:
            outcome = client.upsert(args.key, body)
    except NotesError as exc:
        print(f"post-note: {exc}", file=sys.stderr)
        return 1
    extra = f"; {outcome.duplicates} older duplicate(s) left as they are" if outcome.duplicates else ""
    print(f"post-note: {outcome.result.value} note {outcome.note_id} for {args.key!r} on !{iid}{extra}")
    return 0
