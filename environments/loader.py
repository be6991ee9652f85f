"""Load, validate and compile an environment: once, before anything runs.

`load_environment("dev")` reads `environments/dev.yaml` and its blueprint, validates the schema and
every semantic rule, and returns the immutable `Environment` — or raises `EnvironmentInvalid` with
all findings together (never a traceback for bad input).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from . import rules
from .documents import read_document
from .findings import Code, EnvironmentInvalid, Finding, Level, finding, format_path
from .model import Blueprint, Environment, EnvironmentDocument
from .model_base import _NAME
from .partial import rules_on_the_rest

ENVIRONMENTS_DIR = Path(__file__).resolve().parent
_BLUEPRINT_NAME = re.compile(_NAME)
REPO_ROOT = ENVIRONMENTS_DIR.parent

_RANGE_ERRORS = {"greater_than", "greater_than_equal", "less_than", "less_than_equal", "too_short", "too_long"}
# Never echo values of these fields back: a misplaced secret must not reach a terminal or a log.
_SECRETISH = ("_path", "token", "password", "secret", "key")


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def _read_yaml(path: Path) -> tuple[dict[str, Any] | None, list[Finding]]:
    return read_document(path, _display(path))


def schema_findings(err: ValidationError, file: str) -> list[Finding]:
    """A pydantic ValidationError as findings with the model's codes (shared with providers' `check`)."""
    out: list[Finding] = []
    for e in err.errors(include_url=False):
        loc = tuple(p for p in e["loc"] if not (isinstance(p, str) and p.startswith(("function-", "[key]"))))
        path = format_path(loc)
        leaf = str(loc[-1]) if loc else ""
        kind = e["type"]
        if kind == "missing":
            out.append(
                finding(
                    Code.MISSING_FIELD, file, path, f"required field {leaf!r} is missing", hint=f"add {leaf}: <value>"
                )
            )
        elif kind == "extra_forbidden":
            out.append(finding(Code.UNKNOWN_FIELD, file, path, f"unknown field {leaf!r}"))
        elif kind in _RANGE_ERRORS:
            ctx = e.get("ctx", {})
            bound = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in ctx.items())
            out.append(finding(Code.OUT_OF_RANGE, file, path, f"{e['msg']}", hint=f"use a value with {bound}"))
        else:
            msg = e["msg"].removeprefix("Value error, ")
            if not any(s in leaf for s in _SECRETISH) and kind not in ("value_error",) and "input" in e:
                shown = repr(e["input"])
                msg = f"{msg} (got {shown[:60]})"
            out.append(finding(Code.INVALID_VALUE, file, path, msg))
    return out


def _validate(model: type[BaseModel], data: dict[str, Any], file: str) -> tuple[Any, list[Finding]]:
    try:
        return model.model_validate(data), []
    except ValidationError as e:
        return None, schema_findings(e, file)


@functools.cache
def _load_blueprint(name: str) -> tuple[Blueprint | None, tuple[Finding, ...]]:
    path = ENVIRONMENTS_DIR / "blueprints" / f"{name}.yaml"
    data, found = _read_yaml(path)
    if data is None:
        return None, tuple(found)
    bp, found = _validate(Blueprint, data, _display(path))
    return bp, tuple(found)


def environment_path(name_or_path: str | Path) -> Path:
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml"):
        return p
    return ENVIRONMENTS_DIR / f"{name_or_path}.yaml"


def validate_environment(name_or_path: str | Path) -> tuple[Environment | None, list[Finding]]:
    """All findings of an environment, and the compiled model when there is no error."""
    path = environment_path(name_or_path)
    file = _display(path)
    data, found = _read_yaml(path)
    if data is None:
        return None, found
    bp_name = data.get("blueprint")
    bp: Blueprint | None = None
    if isinstance(bp_name, str) and _BLUEPRINT_NAME.match(bp_name):  # a name, never a path (the schema says so)
        bp, bp_found = _load_blueprint(bp_name)
        found += list(bp_found)
        if bp is None and not bp_found:
            found.append(finding(Code.NO_SUCH_DOCUMENT, file, "blueprint", f"blueprint {bp_name!r} not found"))
    doc: EnvironmentDocument | None = None
    try:
        doc = EnvironmentDocument.model_validate(data)
    except ValidationError as schema_error:
        found += schema_findings(schema_error, file)
        if bp is not None:  # the rules still check what the schema accepted (environments/partial.py)
            blueprint = bp
            found += rules_on_the_rest(
                EnvironmentDocument, data, schema_error, lambda d: rules.check_all(d, blueprint, file)
            )
    if doc is not None and bp is not None:
        found += rules.check_all(doc, bp, file)
    if any(f.level is Level.ERROR for f in found) or doc is None or bp is None:
        return None, found
    env = Environment.model_validate(
        {**doc.model_dump(), "hosts": rules.compile_roles(doc, bp), "source": file, "blueprint_model": bp}
    )
    return env, found


def load_environment(name_or_path: str | Path) -> Environment:
    """The compiled environment, or `EnvironmentInvalid` carrying every finding."""
    env, found = validate_environment(name_or_path)
    if env is None:
        raise EnvironmentInvalid(found)
    return env


def declared_environments() -> list[str]:
    return sorted(p.stem for p in ENVIRONMENTS_DIR.glob("*.yaml"))
