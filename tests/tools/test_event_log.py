"""The CLI's engine-event log as the tools read it: secrets masked, torn lines dropped."""

from __future__ import annotations

import json
from pathlib import Path

from tools.pulumi_cli.results import SECRET, SECRET_SIG, SECRET_VALUE, Operation, read_events, result_from_events

URN = "urn:pulumi:dev::gpuaas-infra::pulumi-python:dynamic:Resource::pool"


def _outputs_event(outputs: dict[str, object]) -> dict[str, object]:
    state = {"type": "pulumi-python:dynamic:Resource", "urn": URN, "custom": True, "inputs": {"n": 1},
             "outputs": outputs}
    return {"resOutputsEvent": {"metadata": {"op": "create", "urn": URN, "type": state["type"], "new": state}}}


def test_secrets_are_masked_wherever_they_sit_and_other_values_are_kept(tmp_path: Path) -> None:
    secret = {SECRET_SIG: SECRET_VALUE, "plaintext": '"hunter2"'}
    look_alike = {SECRET_SIG: "something else", "plaintext": "kept"}  # not the secret signature's value
    log = tmp_path / "events.jsonl"
    log.write_text("\n".join([
        json.dumps(_outputs_event({"token": secret, "nested": [{"deep": secret}, 3], "plain": "visible",
                                   "other": look_alike})),
        json.dumps(_outputs_event({"plain": "no secret on this line"})),
        '{"resOutputsEvent": {"metadata": ',  # torn: the run was killed mid-write
    ]))
    events = read_events(log)
    assert len(events) == 2
    result = result_from_events(Operation.UP, events, 0, "")
    first, second = (s.new.outputs for s in result.steps if s.new is not None)
    assert first == {"token": SECRET, "nested": [{"deep": SECRET}, 3], "plain": "visible", "other": look_alike}
    assert second == {"plain": "no secret on this line"}
    assert "hunter2" not in result.model_dump_json()
