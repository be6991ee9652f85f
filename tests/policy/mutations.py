"""Declarations that break a mandatory policy: each mutation changes one resource of a stack, as a broken
change to the components would declare it, and names the policies that must then fail the preview.

The policy-test program (tests/policy/program) applies them as a stack transformation when its stack
config `gpuaas-infra:policyTestMutations` lists them (`[{"case", "target", "args"}]`): the resource named
`target` of the mutation's kind registers with the changed inputs (or options), so the real CLI's engine
checks it with the provider and hands it to the policy pack. The test picks each target and its `args`
from a preview of the unchanged stack (in registration order or reversed: a mutation must never depend
on which resource of a kind comes first).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MUTATIONS_KEY = "policyTestMutations"  # in the project's config namespace (gpuaas-infra:)
DYNAMIC = "pulumi-python:dynamic/gpuaas:"


@dataclass(frozen=True)
class Resource:
    """A gpuaas resource of a preview: its URN, type, inputs (no `__` keys) and protect option."""

    urn: str
    type: str
    inputs: dict[str, Any]
    protect: bool = False

    @property
    def name(self) -> str:
        return self.urn.split("::")[-1]

    @property
    def kind(self) -> str:
        return self.type.rsplit(":", 1)[-1]


def _nothing(_: dict[str, Any], __: dict[str, Any]) -> None:
    pass


def _no_args(_: list[Resource]) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class Mutation:
    kind: str
    expected: frozenset[str]  # exactly the policies that must fail
    target: Callable[[list[Resource]], str]  # the resource to change, picked from the unchanged stack
    keys: tuple[str, ...] = ()  # the top-level inputs `change` reads and changes (only those are replaced)
    change: Callable[[dict[str, Any], dict[str, Any]], None] = _nothing  # (inputs, args), in place
    args: Callable[[list[Resource]], dict[str, Any]] = field(default=_no_args)
    protect: bool | None = None  # the resource option to declare instead, if any
    # The finding code the resource's provider refuses it with at check: the engine still hands the resource
    # to the pack, but the preview stops there, so stack policies (judged at its end) never run.
    refused: str | None = None

    def apply(self, inputs: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        out = copy.deepcopy(inputs)
        self.change(out, args)
        if set(out) != set(inputs):
            raise ValueError(f"a {self.kind} mutation changed top-level inputs other than {self.keys}: {sorted(out)}")
        return out


def first(kind: str, name: str | None = None) -> Callable[[list[Resource]], str]:
    """The first resource of `kind` (named `name`, if given) in the list's order."""

    def pick(resources: list[Resource]) -> str:
        for r in resources:
            if r.kind == kind and (name is None or r.name == name):
                return r.name
        raise AssertionError(f"no {kind} {name or ''} in the stack to mutate")

    return pick


def members(inputs: dict[str, Any]) -> dict[str, Any]:
    """The AppInstance provider's `instance.members` (or a flat `members`)."""
    return inputs["instance"]["members"] if "instance" in inputs else inputs["members"]


def app_with_member(member: str) -> Callable[[list[Resource]], str]:
    """The AppInstance declaring `member` (registration order is not stable: never take the first app)."""

    def pick(resources: list[Resource]) -> str:
        return next(r.name for r in resources if r.kind == "AppInstance" and member in members(r.inputs))

    return pick


def profile_on(site: str) -> Callable[[list[Resource]], str]:
    def pick(resources: list[Resource]) -> str:
        return next(r.name for r in resources if r.kind == "SiteProfile" and r.inputs["site"]["name"] == site)

    return pick


def first_pool_host(resources: list[Resource]) -> str:
    pool = next(r for r in resources if r.kind == "MachinePool")
    return str(next(iter(pool.inputs["machines"])))  # specs are keyed by hostname


def _first_spec(inputs: dict[str, Any], fields: dict[str, Any]) -> None:
    """Add fields to a pool's first machine spec (one JSON string per hostname)."""
    host = next(iter(inputs["machines"]))
    inputs["machines"][host] = json.dumps({**json.loads(inputs["machines"][host]), **fields})


PLAINTEXT_TOKEN = "glpat-abcdefghij0123456789"
PLAINTEXT_BMC_PASSWORD = "calvin-root-2024"


def _add_host(inputs: dict[str, Any], args: dict[str, Any]) -> None:
    inputs["hosts"] = [*inputs["hosts"], {"hostname": args["host"], "address": "100.88.160.31",
                                          "ssh_user": "gpuaas", **args["as"]}]


def _gpu_worker_of_controllers_app(resources: list[Resource]) -> str:
    """A GPU node the app with the Slurm controller already places workers on (its topology knows it)."""
    app = next(r for r in resources if r.kind == "AppInstance" and "controller" in members(r.inputs))
    return str(members(app.inputs)["worker"]["nodes"][0])


MUTATIONS: dict[str, Mutation] = {
    "pool not protected": Mutation(
        "MachinePool", frozenset({"prod-machines-protected"}), first("MachinePool", "pool-dal1-h200-a"),
        protect=False,
    ),
    "MAAS TLS off": Mutation(
        "MachinePool", frozenset({"maas-tls-verify-outside-prod-only"}), first("MachinePool", "pool-sjc1-h200"),
        ("connection",), lambda i, a: i["connection"]["maas"].update(tls_verify=False),
    ),
    "site TLS off": Mutation(
        "SiteProfile", frozenset({"maas-tls-verify-outside-prod-only"}), first("SiteProfile"),
        ("site",), lambda i, a: i["site"].update(tls_verify=False), refused="POL004",
    ),
    "token in plaintext": Mutation(
        "MachinePool", frozenset({"no-plaintext-secrets"}), first("MachinePool", "pool-dal1-h200-b"),
        ("connection",), lambda i, a: i["connection"]["platform"].update(token=PLAINTEXT_TOKEN),
        refused="ENV002",
    ),
    "BMC password in plaintext": Mutation(
        "MachinePool", frozenset({"no-plaintext-secrets"}), first("MachinePool", "pool-sjc1-h200"),
        ("machines",), lambda i, a: _first_spec(i, {"power_password": PLAINTEXT_BMC_PASSWORD}),
        refused="ENV002",
    ),
    "runner on a worker host": Mutation(
        "HostConvergence", frozenset({"no-control-plane-or-ci-on-worker"}), first("HostConvergence"),
        ("hosts",), _add_host, lambda rs: {"host": first_pool_host(rs), "as": {
            "logical_role": "worker_compute", "roles": ["common", "worker_compute", "runner"]}},
        refused="ROLE001",
    ),
    "GPU machine as a control host": Mutation(
        "HostConvergence", frozenset({"no-control-plane-or-ci-on-gpu-machine"}), first("HostConvergence"),
        ("hosts",), _add_host, lambda rs: {"host": first_pool_host(rs), "as": {
            "logical_role": "app_control", "roles": ["common", "app_control"]}},
    ),
    "Slurm controller on a GPU node": Mutation(
        "AppInstance", frozenset(), app_with_member("controller"),
        ("instance",), lambda i, a: members(i)["controller"].update(nodes=[a["host"]]),
        lambda rs: {"host": _gpu_worker_of_controllers_app(rs)}, refused="ROLE002",
    ),
    # "app-control-plane-not-on-workers" has no prod mutation: prod places no control-plane member on a named
    # node any more (the platform allocates them; a declared host is no node, APP011), and placing one on a
    # GPU worker is refused by the app's own check (ROLE002, the case above), so the stack policy never runs.
    # tests/policy/test_rules.py judges the rule on its own.
    "node SSH key handed to an app": Mutation(
        "AppInstance", frozenset({"no-node-ssh-credentials-in-apps"}), first("AppInstance"),
        ("instance",), lambda i, a: i["instance"].setdefault("inputs", {}).update(
            node_access="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG9dLab operator@prod-app-1"),
        refused="APP008",
    ),
    "customer-handoff site that erases": Mutation(
        "SiteProfile", frozenset({"customer-handoff-never-erases"}),
        profile_on("sjc1"), ("site",), lambda i, a: i["site"].update(customer_handoff=True), refused="POL003",
    ),
    "customer-handoff site whose machines erase": Mutation(
        "SiteProfile", frozenset({"customer-handoff-machines-never-erase"}), profile_on("sjc1"),
        ("site", "profile"), lambda i, a: (i["site"].update(customer_handoff=True),
                                           i["profile"].update(release_erase_mode="none")),
    ),
}

# What a non-prod stack may declare: the same changes pass the pack there.
OUTSIDE_PROD: dict[str, Mutation] = {
    "site TLS off": Mutation(
        "SiteProfile", frozenset(), first("SiteProfile"), ("site",), lambda i, a: i["site"].update(tls_verify=False),
    ),
    "machine TLS off": Mutation(
        "MaasMachine", frozenset(), first("MaasMachine"), ("connection",),
        lambda i, a: i["connection"]["maas"].update(tls_verify=False),
    ),
    "machine not protected": Mutation("MaasMachine", frozenset(), first("MaasMachine"), protect=False),
}
ALL = {**MUTATIONS, **{f"outside prod: {k}": m for k, m in OUTSIDE_PROD.items()}}


def request(case: str, resources: list[Resource]) -> dict[str, Any]:
    """What the program needs to apply `case` (a key of ALL) to the stack whose unchanged resources are
    `resources`."""
    mutation = ALL[case]
    return {"case": case, "target": mutation.target(resources), "args": mutation.args(resources)}
