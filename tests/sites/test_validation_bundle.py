"""A profile's separate post-deploy validation bundle (`post_deploy_validation_bundle_ref` naming a bundle
other than the machine's): the deploy pins it (ref, digest, versioned URL) next to the site bundle, its
digest is in the deploy fingerprint (a change redeploys), bundle.json carries it with its own presigned
URL (masked in the user_data digest), and a validation failure names that bundle. A profile naming the
machine's own bundle (every shipped environment) keeps the fingerprint and user_data it had."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from components.machines import machine_spec, validation_bundle_name
from environments import Environment, load_environment
from environments.loader import ENVIRONMENTS_DIR
from providers.machines.bootstrap import _validation_ref
from providers.machines.cloud_init import render_user_data, user_data_digest

BUNDLE = {"ref": "s3://b/dal1", "digest": "0" * 64, "launcher_url": "http://s3/b/dal1?versionId=1"}
VALIDATION = {"ref": "s3://b/dal1-validate", "digest": "1" * 64, "launcher_url": "http://s3/b/dal1-validate?versionId=2"}
HOST = "dal1-h200-001"


def prod_with_validation_bundle(tmp_path: Path) -> Environment:
    doc = yaml.safe_load((ENVIRONMENTS_DIR / "prod.yaml").read_text())
    dal1 = next(b for b in doc["bootstrap_bundles"] if b["name"] == "dal1-h200")
    doc["bootstrap_bundles"].append({**dal1, "name": "dal1-h200-validate"})
    site = next(s for s in doc["sites"] if s["name"] == "dal1")
    site["profiles"][0]["post_deploy_validation_bundle_ref"] = "dal1-h200-validate"
    path = tmp_path / "prod.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_environment(path)


def spec(env: Environment, validation: dict[str, str] | None) -> Any:
    return machine_spec(env, next(m for m in env.machines if m.hostname == HOST), BUNDLE, [], validation)


def bundle_json(user_data: bytes) -> dict[str, Any]:
    files = yaml.safe_load(user_data)["write_files"]
    return json.loads(next(f for f in files if f["path"] == "/etc/gpuaas/bundle.json")["content"])


def test_the_deploy_pins_the_validation_bundle_and_a_change_redeploys(tmp_path: Path) -> None:
    plain, env = load_environment("prod"), prod_with_validation_bundle(tmp_path)
    doc = next(m for m in env.machines if m.hostname == HOST)
    assert validation_bundle_name(env, doc) == "dal1-h200-validate"
    assert validation_bundle_name(plain, next(m for m in plain.machines if m.hostname == HOST)) is None
    pinned = spec(env, VALIDATION)
    assert pinned.deploy.validation_bundle is not None and pinned.deploy.validation_bundle.digest == "1" * 64
    assert pinned.deploy_fingerprint() != spec(plain, None).deploy_fingerprint()
    changed = spec(env, {**VALIDATION, "digest": "2" * 64})
    assert changed.deploy_fingerprint() != pinned.deploy_fingerprint(), "a new validation bundle redeploys"
    ud = render_user_data(pinned, platform_url="https://p", node_id="n", token="t", bundle_url="https://site",
                          validation_url="https://validate?X-Amz-Signature=s")
    assert bundle_json(ud)["validation"] == {"ref": VALIDATION["ref"], "sha256": "1" * 64,
                                             "url": "https://validate?X-Amz-Signature=s"}
    assert user_data_digest(pinned, "https://p") != user_data_digest(changed, "https://p")

    class Rec:  # what _validation_ref reads of a lifecycle record
        spec = pinned

    assert _validation_ref(Rec()) == VALIDATION["ref"]  # type: ignore[arg-type]


def test_a_profile_naming_the_machines_own_bundle_keeps_fingerprint_and_user_data() -> None:
    env = load_environment("prod")
    plain = spec(env, None)
    assert plain.deploy.validation_bundle is None
    assert "validation" not in bundle_json(render_user_data(plain, platform_url="https://p", node_id="n", token="t"))
    assert "validation_bundle" not in plain.deploy.model_dump(mode="json", exclude_none=True)
