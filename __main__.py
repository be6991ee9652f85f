"""The gpuaas-infra Pulumi program.

Picks the environment from stack config (`gpuaas-infra:environment`, default: the stack name),
validates and compiles it once, and hands the compiled model to the components; `gpuaas-infra:part`
picks the part of it this stack declares (all, control or site:<name>: components/parts.py).
"""

import pulumi

from components.host_roles import host_roles_findings
from components.settings import CONFIG_KEYS, NAMESPACE, StackConfigInvalid, StackSettings, part_findings
from components.stack import declare_environment
from environments import EnvironmentInvalid, load_environment
from environments.findings import Level

config = pulumi.Config(NAMESPACE)
try:
    settings = StackSettings.from_config(pulumi.get_stack(), {key: config.get(key) for key in CONFIG_KEYS})
except StackConfigInvalid as invalid:
    raise pulumi.RunError(str(invalid)) from None

try:
    environment = load_environment(settings.environment)
except EnvironmentInvalid as invalid:
    # All findings at once, as a plain error (no Python traceback for bad input).
    raise pulumi.RunError(str(invalid)) from None

preview = pulumi.runtime.is_dry_run()
stack_findings = part_findings(environment, settings) + host_roles_findings(environment, settings, preview)
if errors := [f for f in stack_findings if f.level is Level.ERROR]:
    raise pulumi.RunError(str(StackConfigInvalid(errors)))
for warning in stack_findings:  # a preview says what `up` will refuse (PIN001), and still shows the plan
    pulumi.warn(warning.render())

missing = settings.unresolved_endpoints(environment)
if missing:
    raise pulumi.RunError(
        f"environment {environment.name!r} uses embedded endpoints ({', '.join(missing)}) that this stack "
        "does not resolve; run it through `make demo` (which starts the simulators) or set "
        + ", ".join(f"gpuaas-infra:embedded_{k}_url" for k in missing)
    )

for name, value in declare_environment(environment, settings).items():
    pulumi.export(name, value)
