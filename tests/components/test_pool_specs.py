"""A pool's `machines` and `template` inputs as the program registers them (Pulumi's mocks): each machine's whole
spec, read back from the registered strings, is the one `machine_spec` makes from the published bundle and the
machine's RoCE links of the assignment's table. The pool's specs are made in two steps (everything but the links
once the bundles are known, the links once the table is: issue 29); this holds them to the one-step spec."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from components.machines import machine_spec
from environments import load_environment
from providers.machines.resource_io import expand_specs
from providers.machines.spec import MachineSpec
from providers.sites.roce import RoceSpec, allocate, table_of

from .test_stack import STAND_INS, Recorder


class TableRecorder(Recorder):
    """test_stack's recorder, with the table the RoCE provider would plan (every machine's addresses)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, dict[str, list[str]]] = {}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        rid, outs = super().new_resource(args)
        if args.typ.endswith(":RoceAssignment"):
            spec = RoceSpec.model_validate(args.inputs)
            table = table_of(allocate(spec.pools, spec.nics(), {}), [m.hostname for m in spec.machines])
            self.tables[spec.site] = table
            outs |= {"table": table, "link_status": {}}
        return rid, outs


@pytest.fixture
def recorder() -> TableRecorder:
    rec = TableRecorder()
    pulumi.runtime.set_mocks(rec, project="gpuaas-infra", stack="staging", preview=False)
    return rec


@pytest.mark.parametrize("environment", ["local", "staging"])
@pulumi.runtime.test
def test_each_pool_machine_is_the_spec_of_its_bundle_and_its_roce_links(recorder: TableRecorder,
                                                                        environment: str) -> Any:
    from components.settings import StackSettings
    from components.stack import declare_environment

    env = load_environment(environment)
    settings = StackSettings.from_config(environment, {"hostRoles": "{}", **(
        {"embedded_maas_url": "http://127.0.0.1:1", "embedded_platform_url": "http://127.0.0.1:2",
         "embedded_vault_url": "http://127.0.0.1:3", "embedded_s3_url": "http://127.0.0.1:4"}
        if environment == "local" else {})})
    outputs = declare_environment(env, settings)

    def check(_: Any) -> None:
        pools = [r.inputs for r in recorder.resources if r.typ.endswith(":MachinePool")]
        assert pools, f"{environment} declares no pool: the test would check nothing"
        linked = 0
        for inputs in pools:
            whole = expand_specs(inputs["machines"], inputs["template"])
            assert inputs["template"] in {MachineSpec.model_validate(v).wire() for v in whole.values()}
            for hostname, plain in whole.items():
                got = MachineSpec.model_validate(plain)
                doc = env.machine(hostname)
                spec = RoceSpec.model_validate(next(r.inputs for r in recorder.resources
                                                    if r.typ.endswith(":RoceAssignment")
                                                    and r.inputs["site"] == doc.site))
                links = spec.links(recorder.tables[doc.site]).get(hostname, [])
                published = {"ref": got.deploy.bundle_ref, "digest": got.deploy.bundle_digest,
                             "launcher_url": got.deploy.launcher_url}
                pin = got.deploy.validation_bundle
                validation = {"ref": pin.ref, "digest": pin.digest, "launcher_url": pin.url} if pin else None
                assert got == machine_spec(env, doc, published, links, validation), hostname
                assert got.deploy.bundle_digest == STAND_INS["BootstrapBundle"]["digest"]
                linked += bool(links)
        assert linked, f"no pool machine of {environment} has RoCE links: the test would check nothing"

    return pulumi.Output.from_input({k: outputs[k] for k in ("sites", "machines")}).apply(check)
