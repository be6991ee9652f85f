"""Declares a stack's machines through the real `components.machines` over its compiled environment.

The project's own program (`/__main__.py`) gets these resources once the sites area is wired into
`components.stack.BUILDERS`; until then this program hands the machines component what the sites
area will (platform ids, bundle ref/digest, RoCE links, scripts) as fixed, known values, so the
policy tests see the machines' real inputs and options (protect) as the program declares them.
"""

import hashlib

import pulumi

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


for key, value in declare_machines(env, settings, StandInSites()).items():
    pulumi.export(key.replace(":", "_"), value)
