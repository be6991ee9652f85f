"""Rule findings for a document whose schema check failed, so one run reports both kinds.

The rules need a valid `EnvironmentDocument`. When the schema refuses some list items (a machine with a
bad field, a pool missing its name), those items are set aside and the rest is validated again; the
rules then run on what remains. Their findings are mapped back to the original document's paths, and
any finding that names a set-aside item is dropped (it would be about the removal, not the author's
document). A schema error outside every list (a bad top-level field) leaves nothing safe to check: then
only the schema findings are reported.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError

from .findings import Finding, format_path

_MAX_ROUNDS = 50
_INDEX = re.compile(r"^(?P<head>.*?)\[(?P<index>\d+)\](?P<tail>.*)$")


class _Pruned:
    def __init__(self) -> None:
        self.removals: list[tuple[str, int]] = []  # (list path in the coordinates of that moment, index)
        self.names: set[str] = set()

    def original_path(self, path: str) -> str:
        """A path in the pruned document's coordinates, mapped back to the author's document."""
        for list_path, removed in reversed(self.removals):
            prefix = list_path + "["
            if not path.startswith(prefix):
                continue
            m = _INDEX.match(path[len(list_path) :])
            if m is None or m.group("head"):
                continue
            index = int(m.group("index"))
            if index >= removed:
                path = f"{list_path}[{index + 1}]{m.group('tail')}"
        return path

    def mentions_removed(self, finding: Finding) -> bool:
        text = f"{finding.message} {finding.hint}"
        return any(re.search(rf"(?<![\w.-]){re.escape(n)}(?![\w-])", text) for n in self.names)


def _remove_item(data: dict[str, Any], loc: tuple[Any, ...], pruned: _Pruned) -> bool:
    """Remove the innermost list item on `loc`; False when `loc` crosses no list."""
    last_index = max((i for i, part in enumerate(loc) if isinstance(part, int)), default=None)
    if last_index is None:
        return False
    container: Any = data
    for part in loc[:last_index]:
        try:
            container = container[part]
        except (KeyError, IndexError, TypeError):
            return False
    index = loc[last_index]
    if not isinstance(container, list) or index >= len(container):
        return False
    item = container.pop(index)
    if isinstance(item, dict):
        pruned.names |= {str(item[k]) for k in ("name", "hostname") if isinstance(item.get(k), str) and item[k]}
    pruned.removals.append((format_path(loc[:last_index]), index))
    return True


def rules_on_the_rest(
    model: type[BaseModel],
    data: dict[str, Any],
    error: ValidationError,
    run_rules: Callable[[Any], list[Finding]],
) -> list[Finding]:
    """Findings of `run_rules` on `data` without the list items the schema refused (see module doc)."""
    work = copy.deepcopy(data)
    pruned = _Pruned()
    err: ValidationError | None = error
    for _ in range(_MAX_ROUNDS):
        assert err is not None
        loc = tuple(p for p in err.errors(include_url=False)[0]["loc"] if not str(p).startswith("function-"))
        if not _remove_item(work, loc, pruned):
            return []
        try:
            doc = model.model_validate(work)
        except ValidationError as again:
            err = again
            continue
        found = run_rules(doc)
        return [
            f.model_copy(update={"path": pruned.original_path(f.path)})
            for f in found
            if not pruned.mentions_removed(f)
        ]
    return []
