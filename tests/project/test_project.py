"""The Pulumi project files, checked offline since the real CLI can't run here."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from environments import declared_environments

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO.parent / "shared" / "reference" / "pulumi-project.schema.json"


def test_pulumi_yaml_validates_against_published_schema() -> None:
    if not SCHEMA.is_file():
        pytest.fail(f"{SCHEMA} is missing: CI must have ../shared beside the checkout")
    schema = json.loads(SCHEMA.read_text())
    project = yaml.safe_load((REPO / "Pulumi.yaml").read_text())
    jsonschema.validate(project, schema)
    assert project["name"] == "gpuaas-infra"
    assert project["runtime"]["name"] == "python"
    assert project["runtime"]["options"]["virtualenv"] == ".venv"
    assert project["stackConfigDir"] == "stacks"
    assert (REPO / project.get("main", "__main__.py")).is_file()


def test_a_broken_project_file_would_be_caught() -> None:
    schema = json.loads(SCHEMA.read_text())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"name": "x", "runtime": {"name": "python", "bogus": 1}}, schema)


@pytest.mark.parametrize("stack", ["local", "dev", "staging", "prod"])
def test_stack_files_name_a_declared_environment(stack: str) -> None:
    cfg = yaml.safe_load((REPO / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"]
    assert all(k.startswith("gpuaas-infra:") for k in cfg), "stack config keys are namespaced"
    assert cfg.get("gpuaas-infra:environment", stack) in declared_environments()
    # Secrets come from Vault, never from stack config.
    assert not any(isinstance(v, dict) and "secure" in v for v in cfg.values())
