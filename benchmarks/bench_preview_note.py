"""Preview-note rendering speed: a 500-resource preview must render in under a second.

Builds a realistic preview in memory (every op kind; machines, pools, apps, bundles; secrets,
unknowns, long user_data), then times parse + render. Baseline measured in the same run: parsing
the same text with json.loads alone, so the ratio says what the note adds over reading the file.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from preview_note import StackPreview, parse_preview, render_note  # noqa: E402

BUDGET_S = 1.0
DYN = "pulumi-python:dynamic/gpuaas:"
OPS = ("same", "same", "update", "create", "replace", "delete", "refresh")
USER_DATA = "#cloud-config\n" + "write_files:\n  - path: /etc/gpuaas/x\n    content: abc\n" * 20


def _urn(kind: str, name: str) -> str:
    return f"urn:pulumi:dev::gpuaas-infra::gpuaas:components:Site${DYN}{kind}::{name}"


def _machine(i: int, kernel: str) -> dict:
    return {
        "hostname": f"gpu-{i:04d}",
        "site": "dev-lab",
        "profile": "h200",
        "teardown_mode": "reimage",
        "bmc_password": "[secret]",
        "deploy": {
            "distro_series": "jammy",
            "hwe_kernel": kernel,
            "user_data": USER_DATA,
            "bundle_digest": "sha256:7f3c",
        },
    }


def _resource(i: int) -> list[dict]:
    op = OPS[i % len(OPS)]
    kind = ("MaasMachine", "MachinePool", "AppInstance", "BootstrapBundle")[i % 4]
    urn = _urn(kind, f"{kind.lower()}-{i:04d}")
    if kind == "MachinePool":
        old_in = {"site": "dev-lab", "machines": [{"hostname": f"p{i}-{j}", "hwe_kernel": "ga"} for j in range(16)]}
        new_in = {
            "site": "dev-lab",
            "machines": [{"hostname": f"p{i}-{j}", "hwe_kernel": "ga" if j % 5 else "hwe"} for j in range(2, 20)],
        }
        outs = {"machines": {f"p{i}-{j}": {"system_id": f"s{j}", "status": "Deployed"} for j in range(16)}}
    elif kind == "AppInstance":
        old_in = {"app": "slurm", "members": {"worker": {"count": 4.0, "nodes": ["a", "b", "c", "d"]}}}
        new_in = {"app": "slurm", "members": {"worker": {"count": 3.0, "nodes": ["a", "b", "e"]}}}
        outs = {"members": [{"member_id": f"m{n}", "component_key": "worker", "node": n} for n in "abcd"]}
    else:
        old_in, new_in = _machine(i, "ga-22.04"), _machine(i, "hwe-22.04")
        outs = dict(old_in, system_id=f"sys{i}", status="Deployed")
    old = {"urn": urn, "custom": True, "type": DYN + kind, "id": f"id{i}", "inputs": old_in, "outputs": outs}
    new = {
        "urn": urn,
        "custom": True,
        "type": DYN + kind,
        "inputs": new_in,
        "outputs": {"system_id": "04da6b54-80e4-46f7-96ec-b56ff0331ba9"},
    }
    if op == "replace":
        return [
            {"op": o, "urn": urn, "oldState": old, "newState": new, "replaceReasons": ["deploy"]}
            for o in ("create-replacement", "replace", "delete-replaced")
        ]
    if op == "create":
        return [{"op": op, "urn": urn, "newState": new}]
    if op == "delete":
        return [{"op": op, "urn": urn, "oldState": old}]
    if op == "same":
        return [{"op": op, "urn": urn, "oldState": old, "newState": old}]
    if op == "refresh":
        return [{"op": op, "urn": urn, "oldState": old, "newState": dict(old, outputs=dict(outs, status="Ready"))}]
    return [{"op": op, "urn": urn, "oldState": old, "newState": new, "diffReasons": ["deploy"]}]


def preview_text(n: int) -> str:
    steps = [s for i in range(n) for s in _resource(i)]
    diags = [{"urn": steps[0]["urn"], "message": "warning: slow MAAS answer\n", "severity": "warning"}] * 5
    return json.dumps({"config": {"gpuaas-infra:environment": "dev"}, "steps": steps, "diagnostics": diags})


def _time(fn, repeat: int = 5) -> float:  # type: ignore[no-untyped-def]
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def main() -> int:
    ok = True
    for n in (100, 500, 2000):
        text = preview_text(n)
        baseline = _time(lambda text=text: json.loads(text))
        total = _time(lambda text=text: render_note([StackPreview(stack="dev", digest=parse_preview(text, "bench"))]))
        note = render_note([StackPreview(stack="dev", digest=parse_preview(text, "bench"))])
        verdict = ""
        if n == 500:
            ok = total < BUDGET_S
            verdict = f"  budget {BUDGET_S:.1f}s: {'PASS' if ok else 'FAIL'}"
        print(
            f"preview-note {n:5d} resources ({len(text) / 1e6:5.2f} MB json): parse+render {total * 1000:7.1f} ms"
            f" | json.loads baseline {baseline * 1000:6.1f} ms | ratio {total / baseline:5.1f}x"
            f" | note {len(note) / 1e3:6.1f} kB{verdict}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
