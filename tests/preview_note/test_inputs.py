"""Parsing preview files and showing values: errors name file and path; secrets never shown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from preview_note import PreviewInputError, StackPreview, load_event_log, parse_preview, render_note
from preview_note.model import EnforcementLevel, Op
from preview_note.values import (
    SECRET_SIG,
    SECRET_SIG_KEY,
    UNKNOWN_SENTINEL,
    changed_paths,
    flatten,
    show,
)

URN = "urn:pulumi:dev::gpuaas-infra::pulumi-python:dynamic/gpuaas:SiteProfile::dev-lab"


def _doc(old: dict, new: dict, **step: object) -> str:
    s = {
        "op": "update",
        "urn": URN,
        "oldState": {"urn": URN, "inputs": old},
        "newState": {"urn": URN, "inputs": new},
    }
    return json.dumps({"steps": [dict(s, **step)]})


def test_not_json_names_file_and_line() -> None:
    with pytest.raises(PreviewInputError, match=r"^preview-dev.json: line 2 column \d+: not JSON"):
        parse_preview('{"steps": []\n oops', "preview-dev.json")


def test_wrong_shape_names_the_path_inside() -> None:
    text = json.dumps({"steps": [{"op": "create", "urn": URN}, {"op": "explode", "urn": URN}]})
    with pytest.raises(PreviewInputError, match=r"preview-dev.json: steps\[1\]\.op: Input should be"):
        parse_preview(text, "preview-dev.json")


def test_empty_output_says_preview_failed() -> None:
    with pytest.raises(PreviewInputError, match="empty preview output"):
        parse_preview("  \n", "p.json")


def test_unknown_fields_and_ops_are_kept() -> None:
    d = parse_preview(json.dumps({"steps": [{"op": "import", "urn": URN, "futureField": 1}], "duration": 5}), "p")
    assert d.steps[0].op is Op.IMPORT


@pytest.mark.parametrize("value", [UNKNOWN_SENTINEL, "output<string>", "output<map<string, any>>"])
def test_unknowns_both_spellings(value: str) -> None:
    assert show(value) == "(known after apply)"


def test_secret_both_spellings_and_plaintext_lookalikes() -> None:
    assert show("[secret]") == "[secret]"
    assert show({SECRET_SIG_KEY: SECRET_SIG, "ciphertext": "v1:abc"}) == "[secret]"
    assert show("hunter2-but-long", "vault.password") == "[redacted: looks like a secret]"
    assert show("-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn...", "ssh.key_material").startswith("[redacted")
    assert show("secret/gpuaas/dev/maas", "vault_secret_path") == "`secret/gpuaas/dev/maas`"


def test_numbers_from_dynamic_providers_compare_as_ints() -> None:
    assert changed_paths({"count": 4.0}, {"count": 4}) == []
    assert show(4.0) == "`4`"


def test_long_and_multiline_values_are_digested() -> None:
    text = show("#cloud-config\nruncmd: []\n")
    assert text.startswith("[25 bytes, sha256:") and "\n" not in text
    assert show("x" * 500).startswith("[500 bytes, sha256:")


def test_flatten_skips_engine_plumbing() -> None:
    assert flatten({"__provider": "gAWV", "deploy": {"hwe_kernel": "ga"}, "tags": ["a", "b"]}) == {
        "deploy.hwe_kernel": "ga",
        "tags": ["a", "b"],
    }


def test_secret_rotation_reported_by_the_engine_is_shown_without_value() -> None:
    d = parse_preview(
        _doc({"maas_api_key": "[secret]"}, {"maas_api_key": "[secret]"}, diffReasons=["maas_api_key"]), "p"
    )
    note = render_note([StackPreview(stack="dev", digest=d)])
    assert "`maas_api_key`: [secret] → [secret]" in note


def test_plaintext_secret_in_preview_never_reaches_the_note() -> None:
    leaked = "s3cr3t-plaintext-value-0123456789"
    d = parse_preview(_doc({}, {"bmc_password": leaked}), "p")
    d = d.model_copy(
        update={
            "diagnostics": parse_preview(
                json.dumps(
                    {
                        "diagnostics": [
                            {
                                "message": f"connecting with -----BEGIN RSA PRIVATE KEY-----{leaked}"
                                "-----END RSA PRIVATE KEY-----",
                                "severity": "warning",
                            }
                        ]
                    }
                ),
                "p",
            ).diagnostics
        }
    )
    note = render_note([StackPreview(stack="dev", digest=d)])
    assert leaked not in note
    assert "[redacted" in note


def test_unchanged_resources_are_not_mentioned() -> None:
    d = parse_preview(_doc({"site": "a"}, {"site": "a"}).replace('"update"', '"same"'), "p")
    note = render_note([StackPreview(stack="dev", digest=d)])
    assert "dev-lab" not in note and "no changes" in note


def test_event_log_policy_events(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    log.write_text(
        "\n".join(
            json.dumps(e)
            for e in [
                {"sequence": 1, "timestamp": 1, "diagnosticEvent": {"message": "hi", "severity": "info"}},
                {
                    "sequence": 2,
                    "timestamp": 1,
                    "policyEvent": {
                        "resourceUrn": URN,
                        "message": "prod machine not protected",
                        "color": "never",
                        "policyName": "prod-machines-protected",
                        "policyPackName": "gpuaas-policies",
                        "policyPackVersion": "0.1.0",
                        "enforcementLevel": "mandatory",
                    },
                },
            ]
        )
        + "\n"
    )
    [v] = load_event_log(log)
    assert v.enforcement_level is EnforcementLevel.MANDATORY and v.policy_name == "prod-machines-protected"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"policyEvent": {}}\nnot json\n')
    with pytest.raises(PreviewInputError, match=r"bad.jsonl: line 2"):
        load_event_log(bad)


def test_host_ranges_fold_consecutive_numbers() -> None:
    from preview_note.kinds import by_reason, host_ranges

    hosts = [f"dal1-h200-{i:03d}" for i in range(1, 33)] + ["dal1-h200-040", "gpu-a9", "gpu-a10", "lab-1", "lab-2"]
    assert (
        host_ranges(hosts) == "`dal1-h200-001`–`dal1-h200-032`, `dal1-h200-040`, `gpu-a9`, `gpu-a10`, `lab-1`, `lab-2`"
    )
    assert by_reason([("b-2", "tags"), ("a-1", "deploy"), ("a-2", "deploy"), ("a-3", "deploy")]) == (
        "`a-1`–`a-3` (deploy); `b-2` (tags)"
    )


def test_assets_and_archives_are_one_value() -> None:
    asset = {SECRET_SIG_KEY: "c44067f5952c0a294b673a41bacd8c17", "text": "#!/bin/sh\necho hi\n"}
    archive = {SECRET_SIG_KEY: "0def7320c3a5731c473e5ecbe6d01bc7", "path": "bundle.tar.gz"}
    assert flatten({"script": asset, "bundle": archive}) == {"bundle": archive, "script": asset}
    assert show(asset).startswith("[asset ") and "bytes, sha256:" in show(asset)
    assert show(archive).startswith("[archive ")
