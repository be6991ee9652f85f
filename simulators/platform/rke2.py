"""The RKE2 self-managed adapter the simulator plays (seed 000 §1): `server` x1|3, `agent` xN.

Runtime semantics, as the reference controller (`cmd/rke2-self-managed-controller`) has them:
- servers form the control plane (embedded etcd): 1 or 3, never 2; a surplus server is removed, not drained;
- an agent joins only once a server is ready: an agent's `join` step waits for an ACTIVE server
  (the engine re-checks it; after `adapters.JOIN_WAIT_S` simulated seconds the add fails with `server_not_ready`);
- servers are drained last: a server drain is refused (409 `drain_order`) while an agent is active, and a
  decommission drains agents before servers.
Every node mutation goes through the platform's typed tasks: no member, operation or config carries
node SSH credentials (the platform refuses config that looks like them: `node_credentials_refused`).
"""

from __future__ import annotations

from typing import Any

from clients.platform.models import AppType, MemberStatus

from .adapters import AppAdapter, ComponentRule, register

RKE2_COMPONENTS: dict[str, ComponentRule] = {
    "server": ComponentRule(minimum=1, maximum=3, drainable=True, control_plane=True, counts=frozenset({1, 3}),
                            ports=frozenset({6443, 9345})),
    "agent": ComponentRule(minimum=0, maximum=512, drainable=True, joins_after="server"),
}

# What `kubectl get nodes` / the rke2 service would say for each generic member status.
_NODE_STATE = {
    MemberStatus.PENDING: "NotJoined",
    MemberStatus.PROVISIONING: "Joining",
    MemberStatus.ACTIVE: "Ready",
    MemberStatus.UPDATING: "Ready,SchedulingDisabled",
    MemberStatus.DRAINING: "Ready,SchedulingDisabled",
    MemberStatus.DRAINED: "SchedulingDisabled",
    MemberStatus.REMOVING: "NotReady",
    MemberStatus.REMOVED: "Deleted",
    MemberStatus.FAILED: "NotReady",
}


def adapter_detail(key: str, status: MemberStatus, app_version: str) -> dict[str, Any]:
    detail: dict[str, Any] = {
        "service": "rke2-server" if key == "server" else "rke2-agent",
        "node_state": _NODE_STATE[status],
        "rke2_version": app_version,
        "node_credentials": "platform typed tasks only",
    }
    if key == "server":
        detail["etcd"] = "member" if status is MemberStatus.ACTIVE else "not a member"
    return detail


register(AppAdapter(AppType.RKE2, RKE2_COMPONENTS, adapter_detail))
