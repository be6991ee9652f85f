"""What must hold (issue 2, item 4): create -> same -> update -> replace -> refresh with drift -> delete,
with a secret input and a secret output that never appear in plaintext in the state file."""

from __future__ import annotations

import json

from engine import StepOp
from tests.engine.conftest import FixtureStack, assert_ok, widget

PASSWORD = "hunter2-plaintext-input-7f3a"


def spec(size: int = 1, zone: str = "z1") -> list[dict]:
    return [
        widget(
            "app",
            size=size,
            zone=zone,
            password=PASSWORD,
            secret=["password"],
            opts={"additional_secret_outputs": ["token"]},
        ),
    ]


def assert_no_plaintext_secrets(stack: FixtureStack) -> None:
    raw = stack.state_path.read_bytes()
    assert PASSWORD.encode() not in raw
    for obj in stack.backend()["objects"].values():  # the provider-computed secret output
        assert f"tok-{obj['widget_id']}".encode() not in raw
    assert b'"ciphertext": "v1:' in raw


def test_full_lifecycle_with_secrets(stack: FixtureStack) -> None:
    # create
    result = stack.up(spec())
    assert_ok(result)
    app = stack.urn("app")
    assert result.ops()[app] is StepOp.CREATE
    first_id = stack.resource("app").id
    assert stack.objects_by_name()["app"]["password"] == PASSWORD  # the provider got plaintext
    assert_no_plaintext_secrets(stack)
    # The secrets are really stored: the state decrypts back to them.
    decrypted = stack.resource("app", decrypt=True)
    assert decrypted.inputs["password"]["value"] == PASSWORD
    assert decrypted.outputs["token"]["value"] == f"tok-{first_id}-app"
    assert result.outputs["app_token"] == "[secret]"

    # same: a second up changes nothing and calls no mutating provider method
    stack.clear_events()
    result = stack.up(spec())
    assert_ok(result)
    assert set(result.ops().values()) == {StepOp.SAME}
    assert result.changeSummary == {"same": 2}
    assert stack.events() == []

    # update
    result = stack.up(spec(size=2))
    assert_ok(result)
    step = next(s for s in result.steps if s.urn == app)
    assert step.op is StepOp.UPDATE and step.diffReasons is None  # a dynamic provider names no keys
    assert stack.resource("app").id == first_id
    assert stack.objects_by_name()["app"]["size"] == 2
    assert_no_plaintext_secrets(stack)

    # replace (zone forces it; create-before-delete by default)
    stack.clear_events()
    result = stack.up(spec(size=2, zone="z2"))
    assert_ok(result)
    assert result.changeSummary.get("replace") == 1
    assert [s.op for s in result.steps if s.urn == app] == [
        StepOp.CREATE_REPLACEMENT,
        StepOp.REPLACE,
        StepOp.DELETE_REPLACED,
    ]
    assert stack.events() == [("create", "app"), ("delete", "app")]
    second_id = stack.resource("app").id
    assert second_id != first_id
    assert list(stack.backend()["objects"]) == [second_id]
    assert_no_plaintext_secrets(stack)

    # refresh with drift: someone changed the object behind our back
    data = stack.backend()
    data["objects"][second_id]["size"] = 42
    stack.backend_path.write_text(json.dumps(data))
    result = stack.run("refresh")
    assert_ok(result)
    step = next(s for s in result.steps if s.urn == app)
    assert step.op is StepOp.REFRESH and step.drifted  # the provider's diff says an up would change it
    assert result.changeSummary == {"same": 0, "update": 1, "delete": 0}
    assert stack.resource("app").outputs["size"] == 42
    assert_no_plaintext_secrets(stack)
    # ... and the next up puts it back
    result = stack.up(spec(size=2, zone="z2"))
    assert_ok(result)
    assert result.ops()[app] is StepOp.UPDATE
    assert stack.objects_by_name()["app"]["size"] == 2

    # delete: the program no longer declares it
    result = stack.up([])
    assert_ok(result)
    assert result.ops()[app] is StepOp.DELETE
    assert stack.resource("app") is None
    assert stack.backend()["objects"] == {}
    assert PASSWORD.encode() not in stack.state_path.read_bytes()


def test_destroy_removes_everything(stack: FixtureStack) -> None:
    assert_ok(stack.up([widget("a", size=1), widget("b", size=1, refs={"upstream": "a"})]))
    stack.clear_events()
    result = stack.run("destroy")
    assert_ok(result)
    assert stack.events() == [("delete", "b"), ("delete", "a")]
    assert stack.state().resources == []
    assert stack.backend()["objects"] == {}
