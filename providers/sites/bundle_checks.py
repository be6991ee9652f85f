"""What a rendered bundle must be before it is published, checked at `check` (so at preview) with the
bundle's template file and the line named: every cloud-init part is a `#cloud-config` YAML mapping
(cloud-init ignores a part it cannot read, so a broken one would silently do nothing on the node),
and every script a node runs (the launcher's steps, validation, MAAS commissioning/testing scripts) starts with an
interpreter line (MAAS and the launcher exec them directly).
"""

from __future__ import annotations

import yaml

_SCRIPT_DIRS = ("steps/", "validation/", "commissioning/", "testing/")


def problems(template_set: str, files: dict[str, bytes]) -> list[tuple[str, str]]:
    """(template shown as `<set>/<path>.j2`, what is wrong and how to fix it) for each bad file."""
    out: list[tuple[str, str]] = []
    for path, body in sorted(files.items()):
        shown = f"{template_set}/{path}.j2"
        text = body.decode(errors="replace")
        if path.startswith("cloud-init/") and path.endswith((".yaml", ".yml")):
            out += [(shown, msg) for msg in _cloud_config(text)]
        elif path.startswith(_SCRIPT_DIRS) and path.endswith(".sh") and not text.startswith("#!"):
            first = text.splitlines()[0][:60] if text.strip() else "(empty)"
            out.append((shown, f"renders a script without an interpreter line (first line: {first!r}); "
                               "start it with `#!/bin/bash` (or another interpreter)"))
    return out


def _cloud_config(text: str) -> list[str]:
    if not text.startswith("#cloud-config"):
        return ["renders a cloud-init part that does not start with `#cloud-config` (cloud-init would skip it); "
                "make `#cloud-config` its first line"]
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at rendered line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        return [f"renders invalid YAML{at}: {problem}; fix the template (quote values that contain `: ` or `#`)"]
    if doc is not None and not isinstance(doc, dict):
        return [f"renders a cloud-config that is a {type(doc).__name__}, not a mapping of modules; fix the template"]
    return []
