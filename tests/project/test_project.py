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


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_real_stacks_encrypt_with_their_own_vault_transit_key(stack: str) -> None:
    """docs/operations.md §0: state on the site's S3, secrets through Vault transit, one key per stack.
    `encryptedkey` is written by `pulumi stack init` (a placeholder would be a key nobody can decrypt)."""
    doc = yaml.safe_load((REPO / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    assert doc["secretsprovider"] == f"hashivault://gpuaas-{stack}"
    assert "encryptionsalt" not in doc, "a passphrase salt beside a Vault provider would be ignored"
    assert "encryptedkey" not in doc or len(str(doc["encryptedkey"])) > 40


def test_the_docs_show_the_real_backend_and_stack_creation() -> None:
    ops = (REPO / "docs" / "operations.md").read_text()
    readme = (REPO / "README.md").read_text()
    for text in (ops, readme):
        assert "pulumi stack select --create" in text or "pulumi stack init" in text
        assert "s3ForcePathStyle=true" in text and "--secrets-provider hashivault://" in text
