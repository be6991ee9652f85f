#!/bin/bash
# gpuaas-node-health: is this GPU node what a healthy, bootstrapped GPUaaS node is? (docs/node-bootstrap.md)
# The GPU lane's smoke job (.gitlab-ci.yml `gpu-smoke-dev`) runs it on the GPU host; anyone may (no root needed:
# it reads only public files and asks systemd). One line per check, `ok` or `FAIL` with what was found; exit 1
# when any check fails.
#   bootstrap   /var/lib/gpuaas-status/bootstrap.json (the launcher's summary): outcome succeeded, every step ok,
#               the bundle and the validation bundle digests it ran
#   token       the single-use enrollment token file is gone (a finished bootstrap deletes it)
#   agent       the node agent's unit is active and its last heartbeat was accepted by the platform, recently
#               (/var/lib/gpuaas-node-agent/heartbeat.json, written by the agent)
#   gpus        nvidia-smi lists at least GPUAAS_EXPECTED_GPUS GPUs (default 1)
# GPUAAS_ROOT prefixes the files (tests); GPUAAS_HEARTBEAT_MAX_AGE_S bounds the heartbeat's age (default 300).
set -u
R="${GPUAAS_ROOT:-}"
MAX_AGE="${GPUAAS_HEARTBEAT_MAX_AGE_S:-300}"
failed=0
say() { echo "$1 $2: $3"; [ "$1" = ok ] || failed=1; }

out=$(python3 - "$R/var/lib/gpuaas-status/bootstrap.json" <<'PY'
import json, sys
try:
    doc = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    print(f"FAIL no bootstrap summary ({e}): the launcher never finished on this node")
    sys.exit()
bad = [s["step"] for s in doc.get("steps", []) if not s.get("ok")]
if doc.get("outcome") != "succeeded" or bad:
    print(f"FAIL outcome {doc.get('outcome')}, failed step {doc.get('failed_step') or ', '.join(bad)}")
else:
    print(f"ok succeeded: {len(doc['steps'])} steps, bundle {doc['bundle_digest'][:12]}, validation bundle "
          f"{(doc.get('validation_bundle_digest') or '?')[:12]} ({doc.get('validation_bundle_ref')}), node {doc.get('node_id')}")
PY
)
say "${out%% *}" bootstrap "${out#* }"

if [ -e "$R/etc/gpuaas/enrollment.json" ]; then
  say FAIL token "/etc/gpuaas/enrollment.json is still there: the bootstrap did not finish"
else
  say ok token "the enrollment token file is gone"
fi

unit=$(systemctl is-active gpuaas-node-agent.service 2>/dev/null)
out=$(python3 - "$R/var/lib/gpuaas-node-agent/heartbeat.json" "$MAX_AGE" <<'PY'
import json, sys, time
try:
    doc = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    print(f"FAIL no heartbeat record ({e})")
    sys.exit()
age = time.time() - (doc.get("last_ok_at") or 0)
if not doc.get("last_ok_at"):
    print(f"FAIL the platform never took a heartbeat ({doc.get('error', 'no error recorded')})")
elif age > float(sys.argv[2]):
    print(f"FAIL last heartbeat taken {age:.0f}s ago (limit {sys.argv[2]}s; last attempt: {doc.get('error') or 'ok'})")
else:
    print(f"ok agent {doc.get('version')}: last heartbeat taken {age:.0f}s ago, node {doc.get('status')}, "
          f"{doc.get('heartbeats_ok')} taken")
PY
)
if [ "$unit" != active ]; then
  say FAIL agent "gpuaas-node-agent.service is ${unit:-unknown}; ${out#* }"
else
  say "${out%% *}" agent "${out#* }"
fi

expected="${GPUAAS_EXPECTED_GPUS:-1}"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
if [ "${gpus:-0}" -ge "$expected" ]; then
  say ok gpus "$gpus GPU(s) visible to the driver"
else
  say FAIL gpus "${gpus:-0} GPU(s) visible, expected at least $expected"
fi
exit "$failed"
