"""Stack references as the CLI resolves them for a self-hosted backend, against pulumi/pulumi's source:

- ``sdk/python/lib/pulumi/stack_reference.py``: ``StackReference(name, stack_name)`` is a
  ``CustomResource`` of type ``pulumi:pulumi:StackReference`` declared with ``ResourceOptions(id=stack)``
  (a read: ``ReadResource``) and inputs ``{name, outputs: None, secret_output_names: None}``;
  ``get_output`` is secret when its name is in ``secretOutputNames``.
- ``pkg/resource/deploy/builtins.go``: ``Read`` refuses any input but ``name`` and returns
  ``readStackReference``: ``{"name", "outputs": <the stack's outputs>, "secretOutputNames": <sorted names
  of the outputs holding secrets>}``; a stack the backend does not have is an error (no outputs made up).

Here a referenced stack is its state file (``--stack-state NAME=PATH``); an unmapped or never-deployed
stack fails the run the way the backend's lookup error fails it under the CLI.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine import EngineResult, StepOp
from engine.crypto import TEST_PASSPHRASE
from engine.stackrefs import STACK_REFERENCE_TYPE
from tests.engine.conftest import FIXTURE_PROJECT, FixtureStack, assert_ok, widget
from tests.fixtures.engine import EngineFactory


def _consumer(factory: EngineFactory, tmp_path: Path, refs: list[dict[str, Any]],
              states: dict[str, Path]) -> Any:
    config = {"spec": "[]", "backend": str(tmp_path / "consumer-backend.json"), "stackrefs": json.dumps(refs)}
    return factory(FIXTURE_PROJECT, "consumer", config=config, state_path=tmp_path / "consumer.json",
                   stack_states=states)


def _reference(result: EngineResult) -> Any:
    return next(s for s in result.steps if STACK_REFERENCE_TYPE in s.urn)


def test_outputs_and_secret_output_names_as_builtins_go(stack: FixtureStack, engine_factory: EngineFactory,
                                                        tmp_path: Path) -> None:
    assert_ok(stack.up([widget("w", size=3, opts={"additional_secret_outputs": ["token"]})]))
    produced = stack.state(decrypt=True).outputs
    refs = [{"name": "producer", "stack": "test", "outputs": ["w_id", "w_token", "missing"]}]
    consumer = _consumer(engine_factory, tmp_path, refs, {"test": stack.state_path})

    preview = consumer.preview()  # reads run in a preview too: the values are known before `up`
    assert_ok(preview)
    assert preview.outputs["producer:w_id"] == produced["w_id"]

    up = consumer.up()
    assert_ok(up)
    step = _reference(up)
    assert step.op is StepOp.READ and step.urn.endswith("::pulumi:pulumi:StackReference::producer")
    assert up.outputs["producer:w_id"] == produced["w_id"]
    assert up.outputs["producer:w_token"] == "[secret]", "secretOutputNames makes get_output secret"
    assert up.outputs.get("producer:missing") is None

    [res] = [r for r in consumer_state(consumer).resources if r.type == STACK_REFERENCE_TYPE]
    assert res.external and res.id == "test" and res.inputs == {"name": "test"}
    assert set(res.outputs) == {"name", "outputs", "secretOutputNames"}
    assert res.outputs["secretOutputNames"] == ["w_token"]
    assert res.outputs["outputs"]["w_id"] == produced["w_id"]
    on_disk = json.dumps(consumer_state(consumer, decrypt=False).model_dump(mode="json"))
    assert produced["w_token"]["value"] not in on_disk, "the referenced secret stays encrypted in this state"

    again = consumer.preview(expect_no_changes=True)
    assert_ok(again)


def consumer_state(engine: Any, decrypt: bool = True) -> Any:
    from engine import read_state

    return read_state(engine.state_path, TEST_PASSPHRASE if decrypt else None)


def test_qualified_names_resolve_and_refresh_rereads(stack: FixtureStack, engine_factory: EngineFactory,
                                                     tmp_path: Path) -> None:
    """A DIY backend takes ``organization/<project>/<stack>``; refresh reads the stack's outputs again
    (builtins.go ``Read``), so a changed output is drift of the reference."""
    assert_ok(stack.up([widget("w", size=3)]))
    refs = [{"name": "producer", "stack": "organization/engine-fixture/test", "outputs": ["w_id"]}]
    consumer = _consumer(engine_factory, tmp_path, refs, {"test": stack.state_path})
    assert_ok(consumer.up())
    assert_ok(stack.up([widget("w", size=3), widget("v", size=1)]))
    refreshed = consumer.refresh()
    assert_ok(refreshed)
    step = next(s for s in refreshed.steps if STACK_REFERENCE_TYPE in s.urn)
    assert step.op is StepOp.REFRESH and step.drifted and step.diffReasons == ["outputs"]


def test_an_unknown_stack_is_refused_loudly(stack: FixtureStack, engine_factory: EngineFactory,
                                            tmp_path: Path) -> None:
    refs = [{"name": "elsewhere", "stack": "prod-nyc1", "outputs": ["x"]}]
    unmapped = _consumer(engine_factory, tmp_path, refs, {"test": stack.state_path}).up()
    assert not unmapped.ok and unmapped.exitCode == 1
    text = "\n".join(unmapped.errors())
    assert "unknown stack 'prod-nyc1'" in text and "--stack-state prod-nyc1=PATH" in text and "test" in text
    assert not (tmp_path / "consumer.json").exists(), "the preview `up` runs first failed: nothing was written"

    never = _consumer(engine_factory, tmp_path, refs, {"prod-nyc1": tmp_path / "absent.json"}).preview()
    assert not never.ok and "it was never deployed" in "\n".join(never.errors())
