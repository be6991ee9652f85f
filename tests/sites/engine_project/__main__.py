"""The real program's first step and the sites builder only: the CLI tests of issue 5 exercise
sites, profiles, bundles and RoCE assignments without depending on other areas' builders."""

import pulumi

from components.settings import CONFIG_KEYS, StackSettings
from components.site import build_sites
from environments import load_environment

config = pulumi.Config("gpuaas-infra")
settings = StackSettings.from_config(pulumi.get_stack(), {key: config.get(key) for key in CONFIG_KEYS})
environment = load_environment(settings.environment)
pulumi.export("sites", build_sites(environment, settings).outputs)
