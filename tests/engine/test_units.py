"""The engine's pure parts, one at a time: planning, ordering, secrets, encryption, messages, config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.config import ConfigError, load_stack_config, parse_overrides
from engine.crypto import Crypter, PassphraseError
from engine.graph import delete_order, topo_order
from engine.model import DiffKind, ResourceState, StepOp
from engine.planner import DIFF_NONE, DIFF_SOME, DIFF_UNKNOWN, apply_ignore_changes, decide
from engine.provider_host import provider_message
from engine.state import StateStore, read_state
from engine.values import SECRET_SIG, SIG_KEY, UNKNOWN, make_secret, mask_secrets, remark_secrets

OLD = {"size": 1.0, "zone": "z1", "__provider": "p"}


def test_diff_unknown_means_engine_diffs_inputs() -> None:
    assert decide(OLD, dict(OLD), DIFF_UNKNOWN, [], [], False, [], None).op is StepOp.SAME
    d = decide(OLD, {**OLD, "size": 2.0}, DIFF_UNKNOWN, [], [], False, [], None)
    assert (d.op, d.diff_reasons, d.detailed["size"].kind) == (StepOp.UPDATE, ["size"], DiffKind.UPDATE)


def test_provider_verdict_wins() -> None:
    assert decide(OLD, {**OLD, "size": 2.0}, DIFF_NONE, [], [], False, [], None).op is StepOp.SAME
    d = decide(OLD, {**OLD, "zone": "z2"}, DIFF_SOME, ["zone"], [], True, [], None)
    assert (d.op, d.replace_reasons, d.delete_before_replace) == (StepOp.REPLACE, ["zone"], True)
    # A provider answering DIFF_SOME without `diffs` (every dynamic provider) gets no diffReasons and no
    # detailed diff: the engine only diffs inputs itself for DIFF_UNKNOWN (step_generator.go diffResource).
    assert (d.diff_reasons, d.detailed) == ([], {})
    d = decide(OLD, {**OLD, "zone": "z2"}, DIFF_SOME, ["zone"], ["zone"], False, [], None)
    assert d.diff_reasons == ["zone"]


def test_replace_on_changes_and_option_dbr() -> None:
    d = decide(OLD, {**OLD, "size": 2.0}, DIFF_UNKNOWN, [], [], False, ["size"], True)
    assert (d.op, d.delete_before_replace) == (StepOp.REPLACE, True)
    d = decide(OLD, {**OLD, "label": "x"}, DIFF_UNKNOWN, [], [], False, [], None)
    assert d.detailed["label"].kind is DiffKind.ADD
    # The resource option overrides the provider either way (step_generator.go goal.DeleteBeforeReplace).
    d = decide(OLD, {**OLD, "zone": "z2"}, DIFF_SOME, ["zone"], [], True, [], False)
    assert (d.op, d.delete_before_replace) == (StepOp.REPLACE, False)
    # replace_on_changes needs changed keys: a dynamic provider's DIFF_SOME names none, so nothing to match.
    d = decide(OLD, {**OLD, "size": 2.0}, DIFF_SOME, [], [], False, ["size"], None)
    assert d.op is StepOp.UPDATE


def test_secret_wrapping_does_not_count_as_a_change() -> None:
    new = {**OLD, "zone": make_secret("z1")}
    assert decide(OLD, new, DIFF_UNKNOWN, [], [], False, [], None).op is StepOp.SAME


def test_ignore_changes_paths() -> None:
    old = {"a": 1, "nested": {"x": 1, "y": 2}}
    new = {"a": 2, "nested": {"x": 9, "y": 9}, "b": 3}
    out = apply_ignore_changes(old, new, ["a", "nested.x", "b"])
    assert out == {"a": 1, "nested": {"x": 1, "y": 9}}
    assert new["a"] == 2  # input untouched


def res(urn: str, deps: tuple[str, ...] = (), parent: str = "") -> ResourceState:
    return ResourceState(urn=urn, custom=True, type="t", dependencies=list(deps), parent=parent)


def test_delete_order_is_reverse_dependency_order() -> None:
    items = [res("c", ("b",)), res("a"), res("b", parent="a"), res("z")]
    assert [r.urn for r in topo_order(items)] == ["a", "b", "c", "z"]
    order = [r.urn for r in delete_order(items)]
    assert order.index("c") < order.index("b") < order.index("a")


def test_remark_secrets_like_the_engine() -> None:
    outs = remark_secrets({"password": "x", "token": "t", "size": 1}, {"password"}, ["token"])
    assert outs["password"] == {SIG_KEY: SECRET_SIG, "value": "x"}
    assert outs["token"][SIG_KEY] == SECRET_SIG and outs["size"] == 1
    assert mask_secrets(outs) == {"password": "[secret]", "token": "[secret]", "size": 1}


def test_crypter_roundtrip_and_wrong_passphrase() -> None:
    c = Crypter.new("pass-1")
    token = c.encrypt({"k": "sensitive"})
    assert "sensitive" not in token
    assert Crypter("pass-1", c.salt).decrypt(token) == {"k": "sensitive"}
    with pytest.raises(PassphraseError):
        Crypter("pass-2", c.salt).decrypt(token)


def test_state_store_never_writes_plaintext(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s.json", "pp", "proj", "st")
    r = ResourceState(
        urn="u",
        custom=True,
        type="t",
        inputs={"pw": make_secret("plain-pw-123")},
        outputs={"deep": {"list": [make_secret({"x": "plain-nested-456"})]}},
    )
    store.save([r], [], {"out": make_secret("plain-out-789")})
    raw = (tmp_path / "s.json").read_text()
    for plain in ("plain-pw-123", "plain-nested-456", "plain-out-789"):
        assert plain not in raw
    doc = read_state(tmp_path / "s.json", "pp")
    assert doc.resources[0].outputs["deep"]["list"][0]["value"] == {"x": "plain-nested-456"}
    assert doc.outputs["out"]["value"] == "plain-out-789"


def test_provider_message_is_the_exception_line_not_the_traceback() -> None:
    tb = (
        'Traceback (most recent call last):\n  File "/x/__main__.py", line 10, in wrapper\n'
        "    return fn(self, request, context)\nproviders.maas.MaasError: machine gpu-01 stuck in "
        "Commissioning\n  (system_id abc123)\n"
    )
    # A continuation line that starts with spaces belongs to the frame list; the message head remains.
    assert provider_message(tb).startswith("MaasError: machine gpu-01 stuck in Commissioning")
    assert (
        provider_message('Traceback (most recent call last):\n  File "x", line 1, in f\n    g()\nValueError: bad')
        == "ValueError: bad"
    )


def test_config_loading(tmp_path: Path) -> None:
    (tmp_path / "cfg").mkdir()
    (tmp_path / "Pulumi.yaml").write_text("name: p\nstackConfigDir: cfg\n")
    (tmp_path / "cfg" / "Pulumi.s.yaml").write_text("config:\n  p:a: x\n  b: 2\n  other:c: true\n  d: {k: [1]}\n")
    cfg = load_stack_config(tmp_path, "s", parse_overrides(["a=over", "maas:url=http://h"]))
    assert cfg.values == {
        "p:a": "over",
        "p:b": "2",
        "other:c": "true",
        "p:d": json.dumps({"k": [1]}),
        "maas:url": "http://h",
    }
    with pytest.raises(ConfigError, match="expected key=value"):
        parse_overrides(["novalue"])
    with pytest.raises(ConfigError, match="Pulumi.yaml: missing"):
        load_stack_config(tmp_path / "cfg", "s")


def test_unknown_constant_matches_the_sdk() -> None:
    from pulumi.runtime import rpc

    assert UNKNOWN == rpc.UNKNOWN


def test_state_errors_name_the_file_and_the_fix(tmp_path: Path) -> None:
    from engine.state import StateError

    with pytest.raises(StateError, match="no such state file"):
        read_state(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(StateError, match=r"bad.json: not valid JSON \(line 1\)"):
        StateStore(bad, "pp", "p", "s")
    other = tmp_path / "other.json"
    StateStore(other, "pp", "p", "stack-a").save([], [], {})
    with pytest.raises(StateError, match="holds stack 'stack-a', not 'stack-b'"):
        StateStore(other, "pp", "p", "stack-b")
    with pytest.raises(StateError, match="does not match the passphrase"):
        StateStore(other, "wrong", "p", "stack-a")
