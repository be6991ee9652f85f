"""The vLLM and OpenClaw adapters the simulator plays (seed 000 §6): two apps on separate allocations.

`vllm` (`serve` x1..N, each on its own allocation, e.g. a 4-GPU slice) publishes an OpenAI-compatible
endpoint once ready; `openclaw` (`gateway` x1) is an app, not a platform feature: it reads the endpoint
it was given as config and runs on a 1-GPU slice, or a CPU-only allocation where the platform offers one.
The endpoint's host carries the instance id, so a replaced vLLM instance publishes a new endpoint.
"""

from __future__ import annotations

from typing import Any

from clients.platform.models import AppType, MemberStatus

from .adapters import AppAdapter, ComponentRule, register

VLLM_COMPONENTS: dict[str, ComponentRule] = {
    "serve": ComponentRule(minimum=1, maximum=16, drainable=True, ports=frozenset({8000})),
}
OPENCLAW_COMPONENTS: dict[str, ComponentRule] = {
    "gateway": ComponentRule(minimum=1, maximum=4, drainable=True, ports=frozenset({18789})),
}


def _vllm_detail(key: str, status: MemberStatus, app_version: str) -> dict[str, Any]:
    return {"process": "vllm serve", "ready": status is MemberStatus.ACTIVE, "vllm_version": app_version}


def _openclaw_detail(key: str, status: MemberStatus, app_version: str) -> dict[str, Any]:
    return {"process": "openclaw gateway", "ready": status is MemberStatus.ACTIVE, "openclaw_version": app_version}


def _vllm_endpoints(name: str, instance_id: str, project_id: str) -> list[tuple[str, str, str]]:
    host = f"{name}-{instance_id.rsplit('-', 1)[-1][:8]}.{project_id}.apps.gpuaas.internal"
    return [("openai", "serve", f"https://{host}/v1")]


register(AppAdapter(AppType.VLLM, VLLM_COMPONENTS, _vllm_detail, _vllm_endpoints))
register(AppAdapter(AppType.OPENCLAW, OPENCLAW_COMPONENTS, _openclaw_detail))
