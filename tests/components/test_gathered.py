"""components/machines.py's `_gathered`: what `Output.all` gives (the values in order, the resources depended on,
secrecy, unknowns), without lifting every leaf of a value into an Output of its own (issue 29: a 1,024-machine
pool's summary made ~5,000 of them, 0.4 s of the program in every pass)."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from components.machines import _gathered


class _Echo(pulumi.runtime.Mocks):
    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
        return {}


@pytest.fixture(autouse=True)
def _mocks() -> None:
    pulumi.runtime.set_mocks(_Echo(), project="gpuaas-infra", stack="test", preview=True)


def _output(value: Any, *, known: bool = True, secret: bool = False,
            deps: tuple[pulumi.Resource, ...] = ()) -> pulumi.Output[Any]:
    async def of(x: Any) -> Any:
        return x

    return pulumi.Output(set(deps), of(value), of(known), of(secret))


async def _seen(o: pulumi.Output[Any]) -> tuple[Any, bool, bool, set[str | None]]:
    urns = {await r.urn.future() for r in await o.resources()}
    return await o.future(), await o.is_known(), await o.is_secret(), urns


CASES: dict[str, list[dict[str, Any]]] = {
    "known": [dict(value={"a": 1}), dict(value=["x", {"y": 2}])],
    "one secret": [dict(value="s", secret=True), dict(value={"a": 1})],
    "one unknown": [dict(value={"a": 1}), dict(value=None, known=False)],
    "with a dependency": [dict(value="v", dep="first"), dict(value={"n": [1, 2]}, dep="second")],
    "none": [],
}


@pytest.mark.parametrize("case", sorted(CASES))
@pulumi.runtime.test
def test_gathered_gives_what_output_all_gives(case: str) -> Any:
    deps = {c["dep"]: pulumi.ComponentResource("test:index:Dep", c["dep"]) for c in CASES[case] if "dep" in c}

    def outputs() -> list[pulumi.Output[Any]]:
        return [_output(c["value"], known=c.get("known", True), secret=c.get("secret", False),
                        deps=(deps[c["dep"]],) if "dep" in c else ()) for c in CASES[case]]

    async def compare() -> None:
        assert await _seen(_gathered(outputs())) == await _seen(pulumi.Output.all(*outputs()))

    return pulumi.Output.from_input(compare())


@pulumi.runtime.test
def test_a_gathered_value_is_the_value_itself_not_a_copy_lifted_leaf_by_leaf() -> Any:
    summary = {f"node-{i:04d}": {"system_id": f"s{i}", "status": "deployed", "node_id": f"n{i}"} for i in range(64)}

    def check(values: list[Any]) -> None:
        assert values[0] == "first" and values[1] is summary  # Output.all rebuilds it from an Output per leaf

    return _gathered([_output("first"), _output(summary)]).apply(check)
