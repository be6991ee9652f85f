"""Stack configuration: ``Pulumi.yaml`` (name, ``stackConfigDir``) + ``Pulumi.<stack>.yaml`` + overrides.

Values are strings, as the CLI hands them to programs (structured values JSON-encoded); keys are
namespaced (``project:key``) exactly like ``pulumi config set``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field


class ConfigError(Exception):
    """Bad project or stack configuration; the message names the file, the key and the fix."""


class ProjectInfo(BaseModel):
    name: str
    main: str = "__main__.py"
    stack_config_dir: str = ""
    directory: Path

    @property
    def main_path(self) -> Path:
        main = self.directory / self.main
        return main / "__main__.py" if main.is_dir() else main


class StackConfig(BaseModel):
    project: ProjectInfo
    stack: str
    values: dict[str, str] = Field(default_factory=dict)
    source: Path | None = None


def _load_yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as exn:
        raise ConfigError(f"{path}: not valid YAML: {exn}") from None


def load_project(directory: Path) -> ProjectInfo:
    path = directory / "Pulumi.yaml"
    if not path.is_file():
        raise ConfigError(f"{path}: missing; --cwd must point at a Pulumi project directory")
    doc = _load_yaml(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("name"), str):
        raise ConfigError(f"{path}: `name` must be a string (the project name)")
    return ProjectInfo(
        name=doc["name"],
        main=str(doc.get("main") or "__main__.py"),
        stack_config_dir=str(doc.get("stackConfigDir") or ""),
        directory=directory.resolve(),
    )


def _as_config_string(path: Path, key: str, value: Any) -> str:
    if isinstance(value, dict) and "secure" in value and len(value) == 1:
        raise ConfigError(
            f"{path}: config `{key}` is a `secure:` value, which only the Pulumi CLI can decrypt; "
            f"pass it with --config {key}=... (or keep secrets in Vault, as the project does)"
        )
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)


def namespaced(project: str, key: str) -> str:
    return key if ":" in key else f"{project}:{key}"


def load_stack_config(directory: Path, stack: str, overrides: dict[str, str] | None = None) -> StackConfig:
    project = load_project(directory)
    path = project.directory / project.stack_config_dir / f"Pulumi.{stack}.yaml"
    values: dict[str, str] = {}
    source: Path | None = None
    if path.is_file():
        source = path
        doc = _load_yaml(path) or {}
        if not isinstance(doc, dict):
            raise ConfigError(f"{path}: expected a mapping with a `config:` key")
        config = doc.get("config") or {}
        if not isinstance(config, dict):
            raise ConfigError(f"{path}: `config` must be a mapping of key: value")
        for key, value in config.items():
            values[namespaced(project.name, str(key))] = _as_config_string(path, str(key), value)
    for key, value in (overrides or {}).items():
        values[namespaced(project.name, key)] = value
    return StackConfig(project=project, stack=stack, values=values, source=source)


def parse_overrides(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--config {item!r}: expected key=value (e.g. --config maas:url=http://...)")
        out[key] = value
    return out
