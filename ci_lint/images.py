"""Images by digest (seed 003, A-CI-BASE-IMAGE-001: "consume image by digest in pipeline jobs").

Every image a job runs in (its own `image`, or `default.image`), after expanding the pipeline's and
the job's `variables`, names a digest (`...@sha256:<64 hex>`): a tag can move under a pipeline, a
digest cannot. CI080 names the job and the image."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from .rules import Finding

_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
_VAR = re.compile(r"\$(?:\{(\w+)\}|(\w+))")
PREDEFINED = ("CI_REGISTRY_IMAGE", "CI_REGISTRY", "CI_PROJECT_PATH")  # GitLab's, never a digest


def _image_name(image: Any) -> str | None:
    if isinstance(image, dict):
        image = image.get("name")
    return str(image) if image else None


def _expand(value: str, variables: dict[str, Any], depth: int = 0) -> str:
    def one(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        v = variables.get(name)
        if isinstance(v, dict):
            v = v.get("value")
        return m.group(0) if v is None else str(v)

    out = _VAR.sub(one, value)
    return out if out == value or depth > 5 else _expand(out, variables, depth + 1)


def image_findings(doc: dict[str, Any], jobs: dict[str, dict[str, Any]]) -> list[Finding]:
    top = dict(doc.get("variables") or {})
    default = _image_name((doc.get("default") or {}).get("image")) or _image_name(doc.get("image"))
    out: list[Finding] = []
    for name, job in sorted(jobs.items()):
        raw = _image_name(job.get("image")) or default
        if raw is None:
            continue
        image = _expand(raw, {**top, **(job.get("variables") or {})})
        if not _DIGEST.search(image):
            out.append(Finding(code="CI080", path=f"{name}.image", message=f"image {image!r} is not pinned by digest",
                               hint="name it <image>@sha256:<digest> (build/ci-image/build.sh --pin)"))
    return out


RUNNER_DEFAULTS = "ansible/roles/runner/defaults/main.yml"


def runner_executor(root: Path) -> str | None:
    """The executor the runner role registers runners with (`runner_executor`), or None without the role."""
    path = root / RUNNER_DEFAULTS
    if not path.is_file():
        return None
    return str((yaml.safe_load(path.read_text()) or {}).get("runner_executor") or "") or None


def executor_findings(doc: dict[str, Any], jobs: dict[str, dict[str, Any]], root: Path) -> list[Finding]:
    """CI081: a job that names an image while the runners are shell executors would run on the host as it is,
    the image ignored: the toolchain a job relies on must come from the runner role (and `make setup`)."""
    if runner_executor(root) != "shell":
        return []
    default = _image_name((doc.get("default") or {}).get("image")) or _image_name(doc.get("image"))
    return [Finding(code="CI081", path=f"{name}.image",
                    message=f"image {(_image_name(job.get('image')) or default)!r} would be ignored: the runners are "
                            f"shell executors ({RUNNER_DEFAULTS})",
                    hint="drop the image; the runner role installs the pinned Pulumi CLI and `make setup` the rest")
            for name, job in sorted(jobs.items()) if _image_name(job.get("image")) or default]

