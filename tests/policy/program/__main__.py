"""Declares a stack's machines and app instances through the real components.

The project's own program declares the same resources, but before a stack's first `up` their inputs
depend on outputs nobody has yet (bundle digests, platform ids, node ids), so a preview shows them
as unknown and the policy pack can't judge them. This program hands the components those values as
fixed, known stand-ins (what the sites area and the machines' enrollment produce), so the policy
tests see the real inputs and options (protect) the components declare.
"""

import hashlib

import pulumi

from components.apps import declare_apps
from components.machines import declare_machines
from components.settings import StackSettings
from environments import load_environment

config = pulumi.Config("gpuaas-infra")
settings = StackSettings.from_config(pulumi.get_stack(), {"environment": config.get("environment")})
env = load_environment(settings.environment)


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

    def commissioning_scripts(self, site: str, profile: str) -> pulumi.Output:
        return pulumi.Output.from_input([f"{site}-{profile}-preflight"])

    def testing_scripts(self, site: str, profile: str) -> pulumi.Output:
        return pulumi.Output.from_input([])


for key, value in declare_machines(env, settings, StandInSites()).items():
    pulumi.export(key.replace(":", "_"), value)
# Members bind to machines by the platform node id each enrolled as; stand-ins here.
declare_apps(env, settings, {m.hostname: f"node-{m.hostname}" for m in env.machines})
