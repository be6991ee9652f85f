"""The real program's first step and the sites builder only: the engine tests of issue 5 exercise
sites, profiles, bundles and RoCE assignments without depending on other areas' builders."""

import pulumi

from components.settings import StackSettings
from components.site import build_sites
from environments import load_environment

config = pulumi.Config("gpuaas-infra")
settings = StackSettings.from_config(
    pulumi.get_stack(),
    {key: config.get(key) for key in ("environment", "embedded_maas_url", "embedded_platform_url",
                                      "embedded_vault_url", "embedded_s3_url")},
)
environment = load_environment(settings.environment)
for name, value in build_sites(environment, settings, {}).items():
    if not name.startswith("_"):
        pulumi.export(name, value)
