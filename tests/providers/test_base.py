"""KindProvider (providers/base.py): what the seven adapters share, tested once on a toy kind; and the
state contract every adapter keeps (pickled by reference, nothing on the instance)."""

from __future__ import annotations

import base64
import importlib
from typing import Any, cast

import dill
import pytest
from pulumi.dynamic import CheckFailure, CheckResult, ConfigureRequest
from pulumi.dynamic.dynamic import serialize_provider
from pydantic import BaseModel, ConfigDict, model_validator

from providers.base import KindProvider
from providers.kind import KIND_MODULES, UNKNOWN, KindDescriptor


class ThingSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    size: int = 1
    tags: list[str] = []


class ThingOut(BaseModel):
    thing_id: str
    status: str


THING = KindDescriptor(name="Thing", identity=("name",), in_place=("size", "tags"), delete_before_replace=True)


class ThingProvider(KindProvider):
    descriptor = THING
    spec_model = ThingSpec
    inputs = ("name", "size", "tags")

    def __init__(self, observed: ThingOut | None = None, drift: bool = False) -> None:
        self.calls: list[tuple[str, Any]] = []
        self._observed, self._drift = observed, drift

    def check_spec(self, olds: dict[str, Any], news: dict[str, Any], spec: Any) -> CheckResult:
        self.calls.append(("check_spec", spec))
        return CheckResult(news, [CheckFailure("tags", "too many")] if len(spec.tags) > 2 else [])

    def drifted(self, olds: dict[str, Any], news: dict[str, Any]) -> bool:
        return self._drift

    def converge(self, props: dict[str, Any], olds: dict[str, Any] | None) -> ThingOut:
        self.calls.append(("converge", olds))
        return ThingOut(thing_id=f"t-{props['name']}", status="ready")

    def id_of(self, props: dict[str, Any], result: Any) -> str:
        return str(result.thing_id)

    def observe(self, id_: str, props: dict[str, Any]) -> ThingOut | None:
        return self._observed


def test_check_accepts_unknowns_as_they_are_and_validates_the_rest() -> None:
    p = ThingProvider()
    news = {"name": "a", "size": UNKNOWN}
    assert p.check({}, news).inputs is news and not p.check({}, news).failures and not p.calls
    # `__provider` never makes the inputs unknown: the spec is validated (and `__` keys are not the spec's)
    assert not p.check({}, {"name": "a", "__provider": UNKNOWN}).failures
    [(_, spec)] = p.calls
    assert spec == ThingSpec(name="a")
    assert p.check({}, {"name": "a", "tags": ["x", "y", "z"]}).failures[0].reason == "too many"


def test_check_names_the_kind_and_path_of_a_bad_input_with_its_code() -> None:
    failures = ThingProvider().check({}, {"name": "a", "size": "big", "colour": "red"}).failures
    by_input = {f.property: f.reason for f in failures}
    assert by_input["colour"].startswith("ENV002 Thing: colour: unknown field 'colour'; fix: ")
    assert by_input["size"].startswith("ENV004 Thing: size: Input should be a valid integer")
    assert len(failures) == 2


def test_diff_reads_the_descriptor_and_the_drift_hook() -> None:
    old = {"name": "a", "size": 1.0, "tags": ["x"], "status": "ready", "__provider": "p1"}
    assert not ThingProvider().diff("t-a", old, {"name": "a", "size": 1, "tags": ("x",), "__provider": "p2"}).changes
    grow = ThingProvider().diff("t-a", old, {"name": "a", "size": 2, "tags": ["x"]})
    assert grow.changes and grow.replaces == []
    renamed = ThingProvider().diff("t-a", old, {"name": "b", "size": 1, "tags": ["x"]})
    assert renamed.changes and renamed.replaces == ["name"] and renamed.delete_before_replace
    assert ThingProvider(drift=True).diff("t-a", old, {"name": "a", "size": 1, "tags": ["x"]}).changes
    assert ThingProvider().diff("t-a", old, {"name": "a", "size": UNKNOWN, "tags": ["x"]}).changes


def test_create_update_read_keep_the_inputs_and_add_the_result() -> None:
    p = ThingProvider()
    props = {"name": "a", "size": 2.0, "tags": ["x"], "status": None, "__provider": "p"}
    created = p.create(props)
    assert created.id == "t-a"
    assert created.outs == {"name": "a", "size": 2, "tags": ["x"], "thing_id": "t-a", "status": "ready"}
    updated = p.update("t-a", created.outs or {}, {**props, "size": 3.0})
    assert (updated.outs or {})["size"] == 3
    assert p.calls == [("converge", None), ("converge", created.outs)]

    class Kept(ThingProvider):
        kept_inputs = ("name",)

    assert Kept().create(props).outs == {"name": "a", "thing_id": "t-a", "status": "ready"}
    seen = ThingProvider(observed=ThingOut(thing_id="t-a", status="degraded")).read("t-a", created.outs or {})
    assert seen.id == "t-a" and (seen.outs or {})["status"] == "degraded"
    gone = ThingProvider(observed=None).read("t-a", created.outs or {})
    assert (gone.id, gone.outs) == ("", {})


def test_the_spec_comes_out_of_state_that_also_holds_outputs() -> None:
    state = {"name": "a", "size": 2.0, "thing_id": "t-a", "status": "ready", "__provider": "p"}
    assert ThingProvider().spec_of(state) == ThingSpec(name="a", size=2)

    class Lenient(BaseModel):  # ignores unknown keys: its validator reads a key older state wrote
        model_config = ConfigDict(extra="ignore")
        name: str

        @model_validator(mode="before")
        @classmethod
        def _older(cls, data: Any) -> Any:
            return {"name": data["label"]} if "label" in data else data

    class Old(ThingProvider):
        spec_model = Lenient  # type: ignore[assignment]

    assert Old().spec_of({"label": "a", "thing_id": "t-a"}) == Lenient(name="a")


def test_credentials_come_from_configure_and_are_none_without_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VAULT_TOKEN", raising=False)
    p = ThingProvider()
    assert p.credentials is None
    p.configure(ConfigureRequest(cast(Any, {"gpuaas-infra:vault_token": "s.test"})))
    assert p.credentials is not None and p.credentials.token is not None
    assert p.credentials.token.get_secret_value() == "s.test"


# `__provider` as state written before the base class holds it (serialize_provider of each adapter).
WRITTEN_BEFORE = {
    "providers.app_instance.AppInstanceProvider":
        "gASVNQAAAAAAAACMFnByb3ZpZGVycy5hcHBfaW5zdGFuY2WUjBNBcHBJbnN0YW5jZVByb3ZpZGVylJOUKYGULg==",
    "providers.bootstrap_bundle.BootstrapBundleProvider":
        "gASVPQAAAAAAAACMGnByb3ZpZGVycy5ib290c3RyYXBfYnVuZGxllIwXQm9vdHN0cmFwQnVuZGxlUHJvdmlkZXKUk5QpgZQu",
    "providers.host_convergence.HostConvergenceProvider":
        "gASVPQAAAAAAAACMGnByb3ZpZGVycy5ob3N0X2NvbnZlcmdlbmNllIwXSG9zdENvbnZlcmdlbmNlUHJvdmlkZXKUk5QpgZQu",
    "providers.maas_machine.MaasMachineProvider":
        "gASVNQAAAAAAAACMFnByb3ZpZGVycy5tYWFzX21hY2hpbmWUjBNNYWFzTWFjaGluZVByb3ZpZGVylJOUKYGULg==",
    "providers.machine_pool.MachinePoolProvider":
        "gASVNQAAAAAAAACMFnByb3ZpZGVycy5tYWNoaW5lX3Bvb2yUjBNNYWNoaW5lUG9vbFByb3ZpZGVylJOUKYGULg==",
    "providers.roce_assignment.RoceAssignmentProvider":
        "gASVOwAAAAAAAACMGXByb3ZpZGVycy5yb2NlX2Fzc2lnbm1lbnSUjBZSb2NlQXNzaWdubWVudFByb3ZpZGVylJOUKYGULg==",
    "providers.site_profile.SiteProfileProvider":
        "gASVNQAAAAAAAACMFnByb3ZpZGVycy5zaXRlX3Byb2ZpbGWUjBNTaXRlUHJvZmlsZVByb3ZpZGVylJOUKYGULg==",
}


def _providers() -> list[type[KindProvider]]:
    out = []
    for module in KIND_MODULES:
        mod = importlib.import_module(module)
        out += [c for c in vars(mod).values()
                if isinstance(c, type) and issubclass(c, KindProvider) and c.__module__ == module]
    return out


def test_every_adapter_is_a_kind_provider_pickled_as_a_bare_class_reference() -> None:
    providers = _providers()
    assert len(providers) == len(KIND_MODULES) == 7
    for cls in providers:
        provider = cls()
        assert vars(provider) == {}, f"{cls.__name__}: state set outside configure changes every __provider input"
        back = dill.loads(base64.b64decode(serialize_provider(provider)))
        assert type(back) is cls and vars(back) == {}
        assert cls.descriptor.type_token.endswith(f"gpuaas:{cls.descriptor.name}")


def test_state_written_before_the_base_class_unpickles_to_the_same_adapters() -> None:
    for where, blob in WRITTEN_BEFORE.items():
        provider = dill.loads(base64.b64decode(blob))
        assert f"{type(provider).__module__}.{type(provider).__name__}" == where
        assert isinstance(provider, KindProvider) and vars(provider) == {}
