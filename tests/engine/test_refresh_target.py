"""refresh when the object is gone, and --target limiting an up, a refresh and a destroy."""

from __future__ import annotations

import json

from engine import StepOp
from tests.engine.conftest import FixtureStack, assert_ok, widget


def test_refresh_drops_a_resource_whose_object_is_gone(stack: FixtureStack) -> None:
    assert_ok(stack.up([widget("a", size=1), widget("b", size=1)]))
    data = stack.backend()
    data["objects"] = {k: v for k, v in data["objects"].items() if v["name"] != "a"}
    stack.backend_path.write_text(json.dumps(data))
    result = stack.run("refresh")
    assert_ok(result)
    assert result.changeSummary == {"same": 1, "update": 0, "delete": 1}
    assert any("gone" in w for w in result.warnings())
    assert stack.resource("a") is None and stack.resource("b") is not None
    result = stack.up([widget("a", size=1), widget("b", size=1)])  # ... and up creates it again
    assert_ok(result)
    assert result.ops()[stack.urn("a")] is StepOp.CREATE


def test_target_limits_up_refresh_and_destroy(stack: FixtureStack) -> None:
    assert_ok(stack.up([widget("a", size=1), widget("b", size=1)]))
    a, b = stack.urn("a"), stack.urn("b")
    changed = [widget("a", size=2), widget("b", size=2), widget("c", size=1)]
    result = stack.engine(changed).up(targets=[a])
    assert_ok(result)
    assert result.ops()[a] is StepOp.UPDATE and result.ops()[b] is StepOp.SAME
    assert stack.urn("c") not in result.ops()  # untargeted new resources are not created
    assert stack.objects_by_name()["b"]["size"] == 1 and "c" not in stack.objects_by_name()

    result = stack.engine(changed).refresh(targets=[b])
    assert_ok(result)
    assert [s.urn for s in result.steps] == [b]

    result = stack.engine(changed).destroy(targets=[b])
    assert_ok(result)
    assert set(stack.objects_by_name()) == {"a"}
    assert stack.resource("a") is not None and stack.resource("b") is None
