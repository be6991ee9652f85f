"""Declares a stack's sites, machines, app instances and host roles through the real components, with
every input known at preview, for the policy pack to judge under the real CLI.

The project's own program declares the same resources, but before a stack's first `up` the machines' and
apps' inputs depend on outputs nobody has yet (bundle digests, platform ids, node ids), so a preview
shows them as unknown and the policy pack can't judge them. This program hands the machines component
those values as fixed, known stand-ins (what the sites area and the machines' enrollment produce); the
sites are the real site component's, and HostConvergence has the inputs `components.host_roles.spec_for`
builds (the project declares it only for stacks with `hostRoles` config; default settings otherwise).

With `gpuaas-infra:policyTestMutations` in the stack config, the mutations it lists
(tests/policy/mutations.py) change the resources they name as they register.
"""

import hashlib
import json
from typing import Any

import pulumi

from components.apps import declare_apps
from components.host_roles import HostRoles, spec_for
from components.machines import declare_machines
from components.settings import HostRolesSettings, StackSettings
from components.site import build_sites
from environments import load_environment
from tests.policy.mutations import ALL, MUTATIONS_KEY

config = pulumi.Config("gpuaas-infra")
settings = StackSettings.from_config(pulumi.get_stack(), {"environment": config.get("environment")})
env = load_environment(settings.environment)


def mutate(args: pulumi.ResourceTransformationArgs) -> pulumi.ResourceTransformationResult | None:
    for req in json.loads(config.get(MUTATIONS_KEY) or "[]"):
        mutation = ALL[req["case"]]
        if args.name != req["target"] or not args.type_.endswith(":" + mutation.kind):
            continue
        opts = args.opts
        if mutation.protect is not None:
            opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(protect=mutation.protect))
        # Only the inputs the mutation touches are replaced (once resolved): the others may wait on other
        # resources' outputs, unknown at preview, and must reach the engine as they were.
        props = dict(args.props)
        touched = pulumi.Output.all(**{k: props[k] for k in mutation.keys})
        changed = touched.apply(lambda inputs, m=mutation, a=req["args"]: m.apply(inputs, a))
        new: dict[str, Any] = {k: changed.apply(lambda inputs, k=k: inputs[k]) for k in mutation.keys}
        return pulumi.ResourceTransformationResult({**props, **new}, opts)
    return None


pulumi.runtime.register_stack_transformation(mutate)


class StandInSites:
    """`components.machines.SiteOutputs` with the values the sites area produces."""

    def platform_ids(self, site: str, profile: str) -> pulumi.Output:
        return pulumi.Output.from_input((f"site-{site}", f"profile-{site}-{profile}"))

    def bundle(self, name: str) -> pulumi.Output:
        digest = "sha256:" + hashlib.sha256(name.encode()).hexdigest()
        ref = f"s3://{env.artifact_store.bucket}/{name}/{digest[7:19]}.tar.gz"
        return pulumi.Output.from_input({"ref": ref, "digest": digest, "launcher_url": ref})

    def roce_links(self, hostname: str) -> pulumi.Output:
        return pulumi.Output.from_input([])

    def site_roce_links(self, site: str) -> pulumi.Output:
        return pulumi.Output.from_input({})

    def commissioning_scripts(self, site: str, profile: str) -> pulumi.Output:
        return pulumi.Output.from_input([f"{site}-{profile}-preflight"])

    def testing_scripts(self, site: str, profile: str) -> pulumi.Output:
        return pulumi.Output.from_input([])


build_sites(env, settings)
for key, value in declare_machines(env, settings, StandInSites()).items():
    pulumi.export(key.replace(":", "_"), value)
# Members bind to machines by the platform node id each enrolled as; stand-ins here.
declare_apps(env, settings, {m.hostname: f"node-{m.hostname}" for m in env.machines})
if env.hosts:
    HostRoles(f"{env.name}-host-roles", spec_for(env, settings, settings.host_roles or HostRolesSettings()))
