"""Resource options the engine honours: delete_before_replace, protect, retain_on_delete,
ignore_changes, additional_secret_outputs, depends_on, and reverse-dependency delete order."""

from __future__ import annotations

from engine import StepOp
from tests.engine.conftest import FixtureStack, assert_ok, widget


def test_delete_before_replace_from_provider_or_option(stack: FixtureStack) -> None:
    # `x`: the provider's DiffResponse asks for it (`exclusive`); `y`: the resource option does; `z`: neither.
    assert_ok(stack.up([widget("x", zone="z1", exclusive=True), widget("y", zone="z1"), widget("z", zone="z1")]))
    stack.clear_events()
    result = stack.up(
        [
            widget("x", zone="z2", exclusive=True),
            widget("y", zone="z2", opts={"delete_before_replace": True}),
            widget("z", zone="z2"),
        ]
    )
    assert_ok(result)
    events = stack.events()
    for name in ("x", "y"):
        assert events.index(("delete", name)) < events.index(("create", name))
    assert events.index(("create", "z")) < events.index(("delete", "z"))
    assert [s.op for s in result.steps if s.urn == stack.urn("x")] == [
        StepOp.DELETE_REPLACED,
        StepOp.REPLACE,
        StepOp.CREATE_REPLACEMENT,
    ]


def test_delete_before_replace_first_deletes_dependents_that_must_be_replaced(stack: FixtureStack) -> None:
    def declared(zone: str) -> list[dict]:
        return [
            widget("base", zone=zone, exclusive=True),
            widget("pinned", size=1, pinned_upstream=True, refs={"upstream": "base"}),  # replaced on new upstream
            widget("loose", size=1, refs={"upstream": "base"}),  # updated in place on new upstream
        ]

    assert_ok(stack.up(declared("z1")))
    stack.clear_events()
    preview = stack.run("preview", declared("z2"))
    assert_ok(preview)
    assert [(s.op, s.urn.rsplit("::", 1)[1]) for s in preview.steps if s.op is StepOp.DELETE_REPLACED] == [
        (StepOp.DELETE_REPLACED, "pinned"),
        (StepOp.DELETE_REPLACED, "base"),
    ]
    result = stack.up(declared("z2"))
    assert_ok(result)
    events = stack.events()
    assert events.index(("delete", "pinned")) < events.index(("delete", "base")) < events.index(("create", "base"))
    assert events.index(("create", "base")) < events.index(("create", "pinned"))
    assert ("delete", "loose") not in events and ("update", "loose") in events
    ops = result.ops()
    assert ops[stack.urn("pinned")] is StepOp.REPLACE and ops[stack.urn("loose")] is StepOp.UPDATE
    assert stack.resource("pinned").inputs["upstream"] == stack.resource("base").id


def test_deletes_run_in_reverse_dependency_order(stack: FixtureStack) -> None:
    chain = [
        widget("base", size=1),
        widget("mid", size=1, refs={"upstream": "base"}),  # property dependency
        widget("top", size=1, opts={"depends_on": ["mid"]}),  # depends_on
        widget("lone", size=1),
    ]
    assert_ok(stack.up(chain))
    stack.clear_events()
    assert_ok(stack.up([]))
    order = [name for op, name in stack.events() if op == "delete"]
    assert order.index("top") < order.index("mid") < order.index("base")
    assert sorted(order) == ["base", "lone", "mid", "top"]


def test_protect_blocks_delete_and_replace(stack: FixtureStack) -> None:
    assert_ok(stack.up([widget("keep", zone="z1", opts={"protect": True})]))
    result = stack.up([])
    assert not result.ok and result.exitCode == 1
    assert any("marked for protection" in e and "`protect` flag" in e for e in result.errors())
    assert stack.resource("keep") is not None and "keep" in stack.objects_by_name()

    result = stack.up([widget("keep", zone="z2", opts={"protect": True})])
    assert not result.ok
    assert any("unable to replace resource" in e and "marked for protection" in e for e in result.errors())
    assert stack.objects_by_name()["keep"]["zone"] == "z1"
    result = stack.run("destroy")
    assert not result.ok and any("marked for protection" in e for e in result.errors())
    assert "keep" in stack.objects_by_name()

    # Unprotect in the program, run up, then the delete goes through.
    assert_ok(stack.up([widget("keep", zone="z1")]))
    assert_ok(stack.up([]))
    assert stack.backend()["objects"] == {}


def test_retain_on_delete_forgets_without_deleting(stack: FixtureStack) -> None:
    assert_ok(stack.up([widget("kept", size=1, opts={"retain_on_delete": True})]))
    stack.clear_events()
    result = stack.up([])
    assert_ok(result)
    assert result.ops()[stack.urn("kept")] is StepOp.DELETE
    assert stack.resource("kept") is None
    assert "kept" in stack.objects_by_name()  # still exists in the external system
    assert stack.events() == []  # Delete was never called


def test_ignore_changes_keeps_old_input(stack: FixtureStack) -> None:
    assert_ok(stack.up([widget("w", size=1, label="a", opts={"ignore_changes": ["size"]})]))
    result = stack.up([widget("w", size=5, label="a", opts={"ignore_changes": ["size"]})])
    assert_ok(result)
    assert result.ops()[stack.urn("w")] is StepOp.SAME
    assert stack.resource("w").inputs["size"] == 1
    # A change to a key that is not ignored still updates, and still keeps the ignored one.
    result = stack.up([widget("w", size=5, label="b", opts={"ignore_changes": ["size"]})])
    assert_ok(result)
    assert result.ops()[stack.urn("w")] is StepOp.UPDATE
    assert stack.objects_by_name()["w"] == {**stack.objects_by_name()["w"], "size": 1, "label": "b"}


def test_additional_secret_outputs_marks_only_those(stack: FixtureStack) -> None:
    assert_ok(stack.up([widget("s", size=1, opts={"additional_secret_outputs": ["token"]}), widget("p", size=1)]))
    secret = stack.resource("s", decrypt=False)
    plain = stack.resource("p", decrypt=False)
    assert set(secret.outputs["token"]) == {"4dabf18193072939515e22adb298388d", "ciphertext"}
    assert isinstance(plain.outputs["token"], str) and plain.outputs["token"].startswith("tok-")
    assert isinstance(secret.outputs["size"], float)  # other outputs stay plain


def test_depends_on_orders_creates_and_independents_run_in_parallel(stack: FixtureStack) -> None:
    result = stack.up(
        [
            widget("first", size=1, delay=1.0),
            widget("after", size=1, opts={"depends_on": ["first"]}),
            widget("free", size=1),
        ]
    )
    assert_ok(result)
    times = {(op, name, phase): t for op, name, phase, t in stack.timed_events()}
    assert times[("create", "after", "start")] >= times[("create", "first", "done")]
    # Independent registrations are not serialised by the engine.
    assert times[("create", "free", "start")] < times[("create", "first", "done")]


def test_component_parent_is_recorded(stack: FixtureStack) -> None:
    result = stack.up([{"name": "grp", "group": True}, widget("child", size=1, parent="grp")])
    assert_ok(result)
    child_urn = stack.urn("child", parent_type="fixture:index:Group")
    group_urn = "urn:pulumi:test::engine-fixture::fixture:index:Group::grp"
    resources = {r.urn: r for r in stack.state().resources}
    assert resources[child_urn].parent == group_urn
    assert resources[group_urn].custom is False
    assert resources[group_urn].outputs == {"name": "grp"}
    urns = [r.urn for r in stack.state().resources]
    assert urns.index(group_urn) < urns.index(child_urn)  # state is in dependency order


def test_read_of_an_existing_resource_is_external(stack: FixtureStack) -> None:
    assert_ok(stack.up([widget("a", size=7)]))
    a_id = stack.resource("a").id
    result = stack.up([widget("a", size=7), {"name": "ref", "read_id": a_id}])
    assert_ok(result)
    assert result.ops()[stack.urn("ref")] is StepOp.READ
    assert result.outputs["ref_size"] == 7
    ref = stack.resource("ref")
    assert ref.external and ref.id == a_id
    stack.clear_events()
    assert_ok(stack.up([widget("a", size=7)]))
    assert stack.resource("ref") is None
    assert stack.events() == []  # forgetting a read resource never deletes the real object
