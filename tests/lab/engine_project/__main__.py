"""The host-roles area of the real program on the lab: the spec comes whole from stack config
(`gpuaas-infra:hostConvergenceSpec`, JSON) because the lab's addresses, artifacts and Vault
are only known at test time."""

import pulumi

from components.host_roles import HostRoles
from providers.hosts.convergence import HostConvergenceSpec

config = pulumi.Config("gpuaas-infra")
spec = HostConvergenceSpec.model_validate_json(config.require("hostConvergenceSpec"))
roles = HostRoles(f"{spec.environment}-host-roles", spec)
pulumi.export("hosts", roles.convergence.host_reports)
pulumi.export("changed_total", roles.convergence.changed_total)
pulumi.export("content_hash", roles.convergence.content_hash)
