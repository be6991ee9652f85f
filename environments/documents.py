"""Reading an environment or blueprint document safely, before any schema or rule runs.

A document is refused with one precise finding, never a traceback or a hang, when it is:
- larger than `MAX_BYTES` (a hand-written environment is a few KB; prod's is 20 KB),
- not UTF-8 (the finding names the byte offset),
- not YAML, or not a mapping at the top,
- an alias bomb: its node graph, with every YAML alias expanded, exceeds `MAX_NODES` (PyYAML shares
  aliased nodes, but everything downstream — the schema, the rules — walks the expanded tree),
- holding a key twice in one mapping (YAML says keys are unique; PyYAML silently keeps the last).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .findings import Code, Finding, finding, format_path

MAX_BYTES = 16 << 20  # a 10,000-machine environment is ~1.5 MB
# Nodes that YAML aliases may add when expanded (over the document's own nodes): legitimate anchors add
# a few hundred; a "billion laughs" document adds exponentially many from a few lines.
MAX_ALIAS_NODES = 100_000
# libyaml's parser where PyYAML was built with it (the pure-Python scanner is ~10x slower: 5.7 s
# of a 5,000-machine environment's 6.6 s validation).
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _expanded_size(node: Node, memo: dict[int, int], limit: int) -> int:
    """Nodes in the tree with aliases expanded (memoised per shared node; stops counting past `limit`).
    `memo` ends holding every distinct node: its length is the document's own node count."""
    key = id(node)
    if key in memo:
        return memo[key]
    memo[key] = 1  # a recursive alias (an anchor inside itself) counts once, never loops
    size = 1
    if isinstance(node, SequenceNode):
        for child in node.value:
            size += _expanded_size(child, memo, limit)
            if size > limit:
                break
    elif isinstance(node, MappingNode):
        for k, v in node.value:
            size += _expanded_size(k, memo, limit) + _expanded_size(v, memo, limit)
            if size > limit:
                break
    memo[key] = size
    return size


def alias_expansion(node: Node, budget: int = MAX_ALIAS_NODES) -> int:
    """How many nodes the document's aliases add when expanded (counting stops a little past `budget`)."""
    memo: dict[int, int] = {}
    # A document has at most MAX_BYTES nodes of its own, so past this the aliases alone exceed `budget`.
    total = _expanded_size(node, memo, MAX_BYTES + budget + 1)
    return max(0, total - len(memo))


def _duplicate_keys(node: Node, path: tuple[int | str, ...] = ()) -> list[tuple[str, int]]:
    """(path of the repeated key, its line) for every mapping holding a key twice."""
    out: list[tuple[str, int]] = []
    if isinstance(node, MappingNode):
        seen: set[str] = set()
        for k, v in node.value:
            name = k.value if isinstance(k, ScalarNode) else str(k.start_mark)
            if name in seen:
                out.append((format_path((*path, name)), k.start_mark.line + 1))
            seen.add(name)
            out += _duplicate_keys(v, (*path, name))
    elif isinstance(node, SequenceNode):
        for i, child in enumerate(node.value):
            out += _duplicate_keys(child, (*path, i))
    return out


def read_document(path: Path, shown: str) -> tuple[dict[str, Any] | None, list[Finding]]:
    """The document's data, or None with the findings that refuse it."""
    if not path.is_file():
        return None, [finding(Code.NO_SUCH_DOCUMENT, shown, "", f"{shown} does not exist")]
    raw = path.read_bytes()
    if len(raw) > MAX_BYTES:
        return None, [finding(Code.DOCUMENT_TOO_LARGE, shown, "",
                              f"the document is {len(raw)} bytes; the limit is {MAX_BYTES}")]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        return None, [finding(Code.NOT_UTF8, shown, f"line {line}",
                              f"byte {e.start} ({raw[e.start:e.start + 1]!r}) is not UTF-8")]
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            data: Any = None
        else:
            if alias_expansion(node) > MAX_ALIAS_NODES:
                return None, [finding(Code.DOCUMENT_TOO_LARGE, shown, "",
                                      f"its YAML aliases expand to more than {MAX_ALIAS_NODES} further nodes "
                                      "(an alias bomb?)", hint="write the values out; use aliases sparingly")]
            dups = _duplicate_keys(node)
            if dups:
                return None, [finding(Code.DUPLICATE_KEY, shown, where, f"key repeated at line {line}; YAML keeps "
                                      "only the last value, so the first would be silently lost")
                              for where, line in dups]
            data = loader.construct_document(node)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        return None, [finding(Code.YAML_SYNTAX, shown, where, f"YAML error: {problem}")]
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        return None, [finding(Code.INVALID_VALUE, shown, "", "the document must be a mapping of fields",
                              hint="start the file with 'name: <environment>'")]
    return data, []
