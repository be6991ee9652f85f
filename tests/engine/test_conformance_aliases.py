"""Conformance: the ``aliases`` resource option, as pulumi/pulumi's engine honours it.

Source: ``pkg/resource/deploy/step_generator.go``: ``getOldResource`` looks a registration up by its
URN first, then by each URN ``generateAliases`` produced (``collapseAliasToUrn`` fills an alias spec's
empty fields from the resource; ``inheritedChildAlias`` gives the children of an aliased parent the URNs
they had under the parent's old URN). A match takes over the old entry (recorded in ``sg.aliased`` so
``GenerateDeletes`` does not delete it) and the diff runs against it: ``same`` or ``update``, never a
delete plus a create. Two registrations claiming one old resource is an error
(``diag.GetDuplicateResourceAliasError``). The snapshot then refers to the resource by its new URN only.
"""

from __future__ import annotations

from engine import StepOp
from tests.engine.conftest import FixtureStack, assert_ok, widget

GROUP = "fixture:index:Group"


def group(name: str, **opts: object) -> dict:
    return {"name": name, "group": True, "opts": dict(opts)}


def _mutations(stack: FixtureStack) -> list[tuple[str, str]]:
    return [e for e in stack.events() if e[0] in ("create", "delete")]


def test_renamed_resource_with_name_alias_is_same_not_delete_create(stack: FixtureStack) -> None:
    assert_ok(stack.up([widget("old", size=1)]))
    old_id = stack.resource("old").id
    stack.clear_events()

    result = stack.up([widget("new", size=1, opts={"aliases": [{"name": "old"}]})])
    assert_ok(result)
    assert result.ops()[stack.urn("new")] is StepOp.SAME
    assert stack.urn("old") not in result.ops()  # no delete step for the old URN
    assert _mutations(stack) == []
    assert stack.resource("old") is None
    assert stack.resource("new").id == old_id


def test_alias_by_whole_urn_and_changed_inputs_is_an_update(stack: FixtureStack) -> None:
    assert_ok(stack.up([widget("old", size=1)]))
    old_id = stack.resource("old").id
    stack.clear_events()

    result = stack.up([widget("new", size=2, opts={"aliases": [stack.urn("old")]})])
    assert_ok(result)
    assert result.ops()[stack.urn("new")] is StepOp.UPDATE
    assert stack.events() == [("update", "new")]
    assert stack.resource("new").id == old_id


def test_reparented_under_new_component_keeps_its_state(stack: FixtureStack) -> None:
    """The coordinator's case: existing resources get a ComponentResource parent; ``Alias(parent=None)``
    (``noParent``) names the URN they had at the top level."""
    assert_ok(stack.up([widget("m1", size=1), widget("m2", size=1)]))
    ids = {n: stack.resource(n).id for n in ("m1", "m2")}
    stack.clear_events()

    spec = [
        group("fleet"),
        widget("m1", size=1, parent="fleet", opts={"aliases": [{"parent": None}]}),
        widget("m2", size=3, parent="fleet", opts={"aliases": [{"parent": None}]}),
    ]
    result = stack.up(spec)
    assert_ok(result)
    m1, m2 = stack.urn("m1", GROUP), stack.urn("m2", GROUP)
    assert result.ops()[m1] is StepOp.SAME
    assert result.ops()[m2] is StepOp.UPDATE
    assert _mutations(stack) == []
    by_urn = stack.state(decrypt=True).by_urn()
    assert by_urn[m1].id == ids["m1"] and by_urn[m2].id == ids["m2"]
    assert stack.urn("m1") not in by_urn and stack.urn("m2") not in by_urn
    # A second up is a no-op: the state now holds the new URNs only.
    again = stack.up(spec)
    assert_ok(again)
    assert set(again.ops().values()) == {StepOp.SAME}


def test_children_inherit_their_renamed_parents_alias(stack: FixtureStack) -> None:
    """``inheritedChildAlias``: only the parent carries an alias; its child, named after the parent
    (``g1-disk`` -> ``g2-disk``), is found under the name it had with the old parent."""
    assert_ok(stack.up([group("g1"), widget("g1-disk", size=1, parent="g1")]))
    old_child = stack.urn("g1-disk", GROUP)
    before = stack.state(decrypt=True).by_urn()[old_child].id
    stack.clear_events()

    result = stack.up([group("g2", aliases=[{"name": "g1"}]), widget("g2-disk", size=1, parent="g2")])
    assert_ok(result)
    new_child = stack.urn("g2-disk", GROUP)
    assert result.ops()[new_child] is StepOp.SAME
    assert result.ops()["urn:pulumi:test::engine-fixture::fixture:index:Group::g2"] is StepOp.SAME
    assert _mutations(stack) == []
    by_urn = stack.state(decrypt=True).by_urn()
    assert by_urn[new_child].id == before and old_child not in by_urn


def test_references_to_the_old_urn_are_rewritten(stack: FixtureStack) -> None:
    assert_ok(stack.up([widget("a", size=1), widget("b", size=1, refs={"upstream": "a"}, opts={"depends_on": ["a"]})]))
    stack.clear_events()

    spec = [
        widget("a2", size=1, opts={"aliases": [{"name": "a"}]}),
        widget("b", size=1, refs={"upstream": "a2"}, opts={"depends_on": ["a2"]}),
    ]
    result = stack.up(spec)
    assert_ok(result)
    assert _mutations(stack) == []
    state = stack.state()
    urns = {r.urn for r in state.resources}
    old_a = stack.urn("a")
    assert old_a not in urns
    for res in state.resources:
        assert old_a not in res.all_dependencies(), res.urn
    # Destroy still orders b before a2 (the rewritten dependency is what orders it).
    assert_ok(stack.run("destroy", spec))
    deletes = [name for op, name in stack.events() if op == "delete"]
    assert deletes == ["b", "a"]  # a `same` keeps the old outputs, so the provider still sees name "a"


def test_two_resources_claiming_one_old_resource_is_an_error(stack: FixtureStack) -> None:
    assert_ok(stack.up([widget("old", size=1)]))
    result = stack.up(
        [
            widget("x", size=1, opts={"aliases": [{"name": "old"}]}),
            widget("y", size=1, opts={"aliases": [{"name": "old"}], "depends_on": ["x"]}),
        ]
    )
    assert not result.ok
    assert any("already uses" in e for e in result.errors()), result.errors()


def test_delete_before_replace_of_a_reparented_resource_keeps_its_replacement(stack: FixtureStack) -> None:
    """A replace (delete first) of a resource taken over by an alias in the same run: delete the old
    object, create the replacement, and nothing more. Before the fix the pending-replacement mark went to
    the old URN, the create took the untouched old state for a create-before-delete, and the end of the
    run deleted the new object (a MaasMachine from v1 state, released after its redeploy)."""
    assert_ok(stack.up([widget("m", zone="z1", exclusive=True)]))
    stack.clear_events()
    moved = widget("m", zone="z2", exclusive=True, parent="fleet", opts={"aliases": [{"parent": None}]})
    spec = [group("fleet"), moved]
    result = stack.up(spec)
    assert_ok(result)
    assert _mutations(stack) == [("delete", "m"), ("create", "m")]
    assert stack.objects_by_name()["m"]["zone"] == "z2"
    by_urn = stack.state(decrypt=True).by_urn()
    assert stack.urn("m") not in by_urn and not by_urn[stack.urn("m", GROUP)].pendingReplacement
    again = stack.up(spec)
    assert_ok(again)
    assert set(again.ops().values()) == {StepOp.SAME}
