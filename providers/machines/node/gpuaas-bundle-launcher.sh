#!/bin/bash
# gpuaas-bundle-launcher: what a deployed GPUaaS node runs once, from its deploy user_data (docs/node-bootstrap.md).
#
# cloud-init writes this file (0700, root) from the user_data, checks it against the sha256 the user_data
# pins and runs it. In order, each step recorded as JSON under /var/lib/gpuaas/steps/<step>.json
# (0600, root: step, ok, duration_s, output_tail); a step already recorded ok is never run again, so a
# node restarted mid-launcher resumes where it stopped:
#   fetch        first the private CAs the user_data carries (/etc/gpuaas/ca.pem, when the environment names
#                any) into the node's trust store; then the bundle through the short-lived presigned URL in
#                /etc/gpuaas/bundle.json, refused unless its sha256 is the digest pinned there; unpacked to
#                /opt/gpuaas/bundle/<digest>. Every https call (bundle, enrollment, agent, reports) verifies
#                with those CAs; an untrusted certificate fails naming the host and the CAs the node has
#   <bundle>     the bundle's steps/NN-<name>.sh in name order (packages, cloud-init parts, storage,
#                fabric, hardware sync, mounts), then each validation/NN-<name>.sh as validate-<name>
#   fetch-validation  when bundle.json names a "validation" bundle (the profile's post-deploy validation
#                bundle): fetched and verified as above; ITS validation scripts run instead
#   enroll       POST <platform>/api/v1/node-bootstrap/enroll with the single-use token and the report
#                (bundle digest + every step's result, outcome "enrolled"); the answer names the node
#                agent package {url, sha256, version}
#   agent-install  download that package, refused unless its sha256 is the one the platform named;
#                install its files under /, write its configuration (/etc/gpuaas-node-agent/agent.json, 0600:
#                the platform, the node id, the agent's own credential from the answer) and enable and start
#                its unit: the agent heartbeats, and the platform calls the node active on the first one
#   report       POST the final report (outcome "succeeded") to <platform>/api/v1/node-bootstrap/report
#                with the (now used) token, accepted once; then the token file is deleted
# A failed step stops the launcher (exit 1): it reports the results so far to
# <platform>/api/v1/node-bootstrap/report and (before enroll) never enrolls.
# GPUAAS_ROOT prefixes every node path (tests run the launcher against a temporary root).
set -uo pipefail
umask 077

R="${GPUAAS_ROOT:-}"
ETC="$R/etc/gpuaas"
BUNDLE_JSON="$ETC/bundle.json"
ENROLL_JSON="$ETC/enrollment.json"
STATE="$R/var/lib/gpuaas"
STEPS="$STATE/steps"
WORK="$STATE/run"
BUNDLES="$R/opt/gpuaas/bundle"
LOG="$R/var/log/gpuaas-launcher.log"
CA_FILE="$ETC/ca.pem"
TAIL_BYTES=2048
export GPUAAS_ROOT="$R" GPUAAS_BUNDLE_JSON="$BUNDLE_JSON" GPUAAS_LAUNCHER_PID=$$ GPUAAS_CA_FILE="$CA_FILE" GPUAAS_WORK="$WORK"

mkdir -p "$ETC" "$STEPS" "$WORK" "$BUNDLES" "$(dirname "$LOG")"
chmod 0700 "$STATE" "$STEPS" "$WORK"

# https for every python step (`from gpuaas_https import urlopen, TlsUntrusted`): the system store plus the
# private CAs of /etc/gpuaas/ca.pem; an untrusted certificate names the host and the CAs the node trusts.
cat > "$WORK/gpuaas_https.py" <<'PY'
import os, ssl, urllib.error, urllib.parse, urllib.request

CA = os.environ.get("GPUAAS_CA_FILE", "")


class TlsUntrusted(OSError):
    """The server's certificate does not chain to a CA this node trusts."""


def ca_names():
    if not (CA and os.path.exists(CA)):
        return "the system store only (the deploy carried no private CA: the environment's ca_bundles.platform / ca_bundles.s3 are unset)"
    names = [ln.split(":", 1)[1].strip() for ln in open(CA) if ln.startswith("# gpuaas-ca:")]
    return f"the CA bundle {CA} ({'; '.join(names) or 'unnamed'}) and the system store"


def urlopen(url, what, data=None, headers=None, timeout=60):
    ctx = ssl.create_default_context()
    if CA and os.path.exists(CA):
        ctx.load_verify_locations(CA)
    req = urllib.request.Request(url, data=data, headers=headers or {}, method="POST" if data is not None else "GET")
    try:
        return urllib.request.urlopen(req, timeout=timeout, context=ctx)
    except urllib.error.URLError as e:
        if isinstance(e.reason, ssl.SSLCertVerificationError):
            host = urllib.parse.urlsplit(url).netloc
            raise TlsUntrusted(
                f"{what}: the TLS certificate of {host} is not trusted ({e.reason.verify_message}); this node "
                f"trusts {ca_names()}; name the CA that signs {host} in the environment's ca_bundles, "
                "then run up again (it redeploys the machine)") from None
        raise
PY
export PYTHONPATH="$WORK${PYTHONPATH:+:$PYTHONPATH}"

log() { printf '%s gpuaas-launcher: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" | tee -a "$LOG" >&2; }

# JSON in and out with python3 (cloud-init itself needs it, so every node that ran this has it).
json_get() { python3 -c 'import json,sys; v=json.load(open(sys.argv[1])).get(sys.argv[2]); print("" if v is None else v)' "$1" "$2"; }

step_ok() {
  [ -f "$STEPS/$1.json" ] && python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1])).get("ok") is True else 1)' "$STEPS/$1.json"
}

record() {  # record <step> <exit code> <duration s> <output file>
  python3 - "$@" "$TAIL_BYTES" <<'PY'
import json, os, sys, time
step, rc, duration, out, tail = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], int(sys.argv[5])
data = open(out, "rb").read()[-tail:].decode("utf-8", "replace") if os.path.exists(out) else ""
doc = {"step": step, "ok": rc == 0, "exit_code": rc, "duration_s": round(duration, 3), "output_tail": data,
       "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
path = os.path.join(os.environ["GPUAAS_STEPS"], step + ".json")
tmp = path + ".tmp"
fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
with os.fdopen(fd, "w") as f:
    json.dump(doc, f, sort_keys=True)
os.replace(tmp, path)
PY
}
export GPUAAS_STEPS="$STEPS"

# What to do next, per step, when it fails (the output tail says what the tool said).
hint() {
  case "$1" in
    fetch|fetch-validation) echo "run \`pulumi up\` again: the lifecycle redeploys this machine with a freshly presigned bundle URL (see the output above: an expired URL, a digest mismatch, an unreachable store or a certificate no CA of the node signs)" ;;
    enroll) echo "run \`pulumi up\` again: the lifecycle redeploys this machine with a fresh enrollment token" ;;
    agent-install) echo "the node agent package the platform names could not be fetched or does not match its sha256 (see above): fix the package the platform publishes (or its digest), then run \`pulumi up\` again (it redeploys this machine)" ;;
    report) echo "the platform did not take the final report (see above): check the platform, then run \`pulumi up\` again (it redeploys this machine)" ;;
    validate-*) echo "fix the node (hardware, driver) or the validation script in the bundle, then run \`pulumi up\` again" ;;
    *) echo "fix the bundle step (a new bundle digest redeploys the machine) or the node, then run \`pulumi up\` again" ;;
  esac
}

report_json() {  # report_json <outcome> <failed step or ""> : the body's "report" member
  python3 - "$@" <<'PY'
import glob, json, os, sys
outcome, failed = sys.argv[1], sys.argv[2] or None
steps = []
for path in sorted(glob.glob(os.path.join(os.environ["GPUAAS_STEPS"], "*.json")), key=os.path.getmtime):
    d = json.load(open(path))
    if d["step"] in ("enroll", "report"):
        continue
    steps.append({k: d[k] for k in ("step", "ok", "duration_s", "output_tail")})
bundle = json.load(open(os.environ["GPUAAS_BUNDLE_JSON"]))
validation = bundle.get("validation") or {}  # none: the site bundle's own validation scripts run
print(json.dumps({"bundle_digest": os.environ["GPUAAS_DIGEST"], "outcome": outcome, "failed_step": failed,
                  "steps": steps, "runner": "launcher",
                  "validation_bundle_digest": validation.get("sha256") or os.environ["GPUAAS_DIGEST"],
                  "validation_bundle_ref": validation.get("ref") or bundle.get("ref")}))
PY
}

post() {  # post <route> <report json> [<file>]: prints "<http status> <platform error code> <message>";
          # the answer's body goes to <file> (0600) when given. 429, 5xx and network failures are retried with
          # bounded backoff (GPUAAS_PLATFORM_ATTEMPTS, default 6; GPUAAS_PLATFORM_BACKOFF_S, default 2, doubling
          # to 30 s, or the answer's Retry-After): about a minute. Every attempt carries one X-Idempotency-Key
          # derived from the request, so an attempt whose answer was lost after the platform took it gets that
          # same answer again (the contract's replay), never "token already used".
  python3 - "$ENROLL_JSON" "$@" <<'PY'
import hashlib, json, os, sys, time, urllib.error, urllib.request
enrollment, route, report = json.load(open(sys.argv[1])), sys.argv[2], json.loads(sys.argv[3])
answer = sys.argv[4] if len(sys.argv) > 4 else None
body = {k: enrollment[k] for k in ("node_id", "enrollment_token", "hostname", "system_id")}
body["report"] = report
data = json.dumps(body, sort_keys=True).encode()
key = "gpuaas-node-" + hashlib.sha256(route.encode() + b"\0" + data).hexdigest()[:48]
attempts = max(1, int(os.environ.get("GPUAAS_PLATFORM_ATTEMPTS", "6")))
delay = float(os.environ.get("GPUAAS_PLATFORM_BACKOFF_S", "2"))
from gpuaas_https import TlsUntrusted, urlopen
RETRIED = (429, 500, 502, 503, 504)
for attempt in range(1, attempts + 1):
    again = f" (attempt {attempt}/{attempts})" if attempt > 1 else ""
    wait = delay
    try:
        with urlopen(enrollment["platform_url"].rstrip("/") + route, "platform API", data=data,
                     headers={"Content-Type": "application/json", "X-Idempotency-Key": key}, timeout=30) as r:
            got = r.read()
            if answer:
                fd = os.open(answer, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(got)
            print(r.status, "-", "accepted" + again)
            sys.exit(0)
    except urllib.error.HTTPError as e:
        try:
            err = json.load(e)  # the platform's error envelope: {code, message, correlation_id, details}
        except ValueError:
            err = {}
        err = err if isinstance(err, dict) else {}
        line = f"{e.code} {err.get('code') or '-'} {err.get('message') or e.reason}{again}"
        if e.code not in RETRIED:
            print(line)
            sys.exit(0)
        retry_after = e.headers.get("Retry-After", "") if e.headers else ""
        wait = float(retry_after) if retry_after.isdigit() else delay
    except TlsUntrusted as e:
        print(0, "tls-untrusted", e)
        sys.exit(0)
    except OSError as e:
        line = f"0 unreachable {type(e).__name__}: {e}{again}"
    if attempt == attempts:
        print(line + f"; gave up after {attempts} attempts")
        sys.exit(0)
    print(f"platform {route}: {line}; retrying in {min(wait, 30):.0f} s", file=sys.stderr)
    time.sleep(min(wait, 30))
    delay = min(delay * 2, 30)
PY
}

status_file() {  # status_file <outcome> <failed step or "">: the node's public bootstrap summary (0644, no secret,
  # no output tails): what the GPU lane's smoke check (gpuaas-node-health.sh) and operators read
  python3 - "$(report_json "$@")" "$R/var/lib/gpuaas-status/bootstrap.json" \
    "$(json_get "$ENROLL_JSON" node_id 2>/dev/null)" <<'PY'
import json, os, sys, time
report, dest, node_id = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
doc = {k: report[k] for k in ("outcome", "failed_step", "bundle_digest", "validation_bundle_digest",
                              "validation_bundle_ref")}
doc.update(node_id=node_id or None, steps=[{"step": s["step"], "ok": s["ok"]} for s in report["steps"]],
           written_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
os.makedirs(os.path.dirname(dest), mode=0o755, exist_ok=True)
os.chmod(os.path.dirname(dest), 0o755)
tmp = dest + ".tmp"
with open(tmp, "w") as f:
    json.dump(doc, f, indent=1, sort_keys=True)
os.chmod(tmp, 0o644)
os.replace(tmp, dest)
PY
}

stop() {  # stop <failed step>: report what ran, name the step and what to do, never enroll
  local step=$1 tail
  tail=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["output_tail"][-600:])' "$STEPS/$step.json" 2>/dev/null)
  log "step $step FAILED: ${tail:-no output}"
  log "what to do: $(hint "$step")"
  status_file failed "$step"
  if [ -f "$ENROLL_JSON" ]; then
    log "reported to the platform: $(post /api/v1/node-bootstrap/report "$(report_json failed "$step")")"
  fi
  if step_ok enroll; then
    rm -f "$ENROLL_JSON"  # used: its one final report is sent
    log "stopped at step $step after enrolling"
  else
    log "stopped at step $step; the node did not enroll"
  fi
  exit 1
}

run_step() {  # run_step <step> <command...>
  local step=$1 out rc start end
  shift
  if step_ok "$step"; then
    log "step $step: recorded ok earlier, skipped"
    return 0
  fi
  out="$WORK/$step.out"
  log "step $step: start"
  start=$(date +%s.%N)
  "$@" >"$out" 2>&1 </dev/null
  rc=$?
  end=$(date +%s.%N)
  record "$step" "$rc" "$(python3 -c "print(max(0.0, $end - $start))")" "$out"
  [ "$rc" -eq 0 ] || stop "$step"
  log "step $step: ok"
}

trust_cas() {  # the user_data's private CAs into the node's trust store (apt and every other client use it)
  # a note for the launcher's log only: a failing fetch's report is its error (a TLS one names the CAs it used)
  [ -f "$CA_FILE" ] || { echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) gpuaas-launcher: no private CA in the user_data:" \
    "the system trust store only" >>"$LOG"; return 0; }
  local dir="$R/usr/local/share/ca-certificates/gpuaas"
  # the system's umask (022) for what other users read: the launcher's own 077 would leave the CA store 0600
  ( umask 022; python3 - "$CA_FILE" "$dir" <<'PY'

import glob, os, re, sys
pems = re.findall(r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", open(sys.argv[1]).read(), re.S)
if not pems:
    sys.exit(f"{sys.argv[1]} holds no PEM certificate")
os.makedirs(sys.argv[2], mode=0o755, exist_ok=True)
for old in glob.glob(os.path.join(sys.argv[2], "gpuaas-ca-*.crt")):
    os.remove(old)
for i, pem in enumerate(pems):  # one certificate per file, as update-ca-certificates wants
    fd = os.open(os.path.join(sys.argv[2], f"gpuaas-ca-{i}.crt"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    with os.fdopen(fd, "w") as f:
        f.write(pem + "\n")
print(f"{len(pems)} private CA certificate(s) from {sys.argv[1]} added to the trust store")
PY
  ) || return 1
  if command -v update-ca-certificates >/dev/null; then
    ( umask 022; update-ca-certificates >/dev/null 2>&1 ) || { echo "update-ca-certificates failed"; return 1; }
  fi
}

bundle_script() {  # a bundle's step or validation script: it installs system things, with the system's umask (022)
  ( umask 022; exec bash "$1" )
}

fetch() {  # fetch [<bundle.json member>]: download through the presigned URL, verify the pinned digest, unpack
  local member=${1:-} digest=$GPUAAS_DIGEST dir=$BUNDLE_DIR
  if [ -n "$member" ]; then digest=$VALIDATION_DIGEST dir=$VALIDATION_DIR; else trust_cas || return 1; fi
  python3 - "$BUNDLE_JSON" "$WORK/bundle.tar.gz" "$member" <<'PY' || return 1
import json, re, sys, urllib.error
from gpuaas_https import TlsUntrusted, urlopen
bundle, dest = json.load(open(sys.argv[1])), sys.argv[2]
bundle = bundle[sys.argv[3]] if sys.argv[3] else bundle
url = bundle.get("url") or ""
if not url:
    sys.exit("no presigned bundle URL in bundle.json: the deploy had no artifact store to presign with")
try:
    with urlopen(url, "bundle download from the artifact store") as r, open(dest, "wb") as f:
        f.write(r.read())
except TlsUntrusted as e:
    sys.exit(str(e))
except urllib.error.HTTPError as e:
    body = e.read().decode("utf-8", "replace")
    expired = "expired" in body.lower()
    s3 = re.search(r"<Code>(.*?)</Code>.*?<Message>(.*?)</Message>", body, re.S)  # S3's error document
    detail = f"{s3.group(1)}: {s3.group(2)}" if s3 else body.strip()[-300:]
    sys.exit(f"bundle download refused: HTTP {e.code}: {detail}"
             + ("\nthe presigned URL expired before the node used it" if expired else ""))
except OSError as e:
    sys.exit(f"artifact store unreachable: {type(e).__name__}: {e}")
print(f"downloaded {bundle.get('ref', '?')}")
PY
  local got
  got=$(sha256sum "$WORK/bundle.tar.gz" | cut -d' ' -f1)
  if [ "$got" != "$digest" ]; then
    echo "bundle refused: its sha256 is $got, the user_data pins $digest"
    rm -f "$WORK/bundle.tar.gz"
    return 1
  fi
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp" &&
    tar -xzf "$WORK/bundle.tar.gz" -C "$dir.tmp" --no-same-owner &&
    rm -rf "$dir" && mv "$dir.tmp" "$dir" || return 1
  rm -f "$WORK/bundle.tar.gz"
  echo "bundle $digest verified and unpacked to $dir"
}

enroll() {  # the answer (with the node agent package) is kept for agent-install, 0600
  local answer
  answer=$(post /api/v1/node-bootstrap/enroll "$(report_json enrolled "")" "$STATE/enrollment-answer.json")
  echo "platform: $answer"
  case "$answer" in
    200\ *) echo "enrolled" ;;
    0\ *) echo "the platform could not be reached (see above): the token is still unused"; return 1 ;;
    *) echo "enrollment refused; the token is single-use and short-lived"; return 1 ;;
  esac
}

agent_install() {  # the node agent package the enrollment answer names: download, verify, install, enable
  local rc unit pkgdir="$WORK/agent"
  python3 - "$STATE/enrollment-answer.json" "$WORK/agent.tar.gz" <<'PY'
import hashlib, json, sys, urllib.error
from gpuaas_https import TlsUntrusted, urlopen
answer, dest = json.load(open(sys.argv[1])), sys.argv[2]
pkg = answer.get("agent_package")
if not pkg:
    print("the platform's enrollment answer names no node agent package: nothing to install")
    sys.exit(3)
try:  # the URL may be signed: never printed
    with urlopen(pkg["url"], f"node agent package {pkg.get('version', '?')}") as r:
        blob = r.read()
except TlsUntrusted as e:
    sys.exit(str(e))
except urllib.error.HTTPError as e:
    sys.exit(f"node agent package {pkg.get('version', '?')}: download refused: HTTP {e.code} {e.reason}")
except OSError as e:
    sys.exit(f"node agent package {pkg.get('version', '?')}: source unreachable: {type(e).__name__}")
got = hashlib.sha256(blob).hexdigest()
if got != pkg["sha256"]:
    sys.exit(f"node agent package {pkg.get('version', '?')} refused: its sha256 is {got}, "
             f"the platform's enrollment answer names {pkg['sha256']}")
open(dest, "wb").write(blob)
print(f"node agent package {pkg.get('version', '?')} downloaded, sha256 {got} verified")
PY
  rc=$?
  [ "$rc" -eq 3 ] && return 0
  [ "$rc" -eq 0 ] || return 1
  # unpacked and copied with the system's umask (022): the package's implied directories (usr/, usr/local/, ...)
  # are copied onto / with their modes, and the launcher's own 077 would make the node's /usr 0700
  rm -rf "$pkgdir" && mkdir -p "$pkgdir" && ( umask 022; tar -xzf "$WORK/agent.tar.gz" -C "$pkgdir" --no-same-owner ) ||
    return 1
  rm -f "$WORK/agent.tar.gz"
  unit=$(json_get "$pkgdir/gpuaas-agent.json" unit 2>/dev/null)
  case "$unit" in
    *.service) [[ "$unit" =~ ^[A-Za-z0-9_.@-]+$ ]] || { echo "package unit name '$unit' is not a unit name"; return 1; } ;;
    *) echo "package has no gpuaas-agent.json naming its .service unit (got '$unit')"; return 1 ;;
  esac
  [ -d "$pkgdir/root" ] || { echo "package has no root/ tree to install"; return 1; }
  ( umask 022; cp -a --no-preserve=ownership "$pkgdir/root/." "$R/" ) || return 1
  agent_config || return 1
  systemctl daemon-reload && systemctl enable --now "$unit" || { echo "unit $unit did not start"; return 1; }
  echo "installed node agent $(json_get "$pkgdir/gpuaas-agent.json" version); $unit enabled and started"
  rm -rf "$pkgdir"
  rm -f "$STATE/enrollment-answer.json"  # its agent credential now lives in the agent's own configuration only
}

agent_config() {  # the node agent's configuration (0600 root): where and as whom it heartbeats
  python3 - "$ENROLL_JSON" "$STATE/enrollment-answer.json" "$R/etc/gpuaas-node-agent/agent.json" <<'PY'
import json, os, sys
enrollment, answer, dest = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
if not answer.get("agent_credential"):
    sys.exit("the platform's enrollment answer gave no agent credential: the node agent could not heartbeat")
conf = {"platform_url": enrollment["platform_url"], "node_id": enrollment["node_id"],
        "agent_credential": answer["agent_credential"],
        "heartbeat_interval_seconds": answer.get("heartbeat_interval_seconds") or 30}
os.makedirs(os.path.dirname(dest), mode=0o700, exist_ok=True)
fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
with os.fdopen(fd, "w") as f:
    json.dump(conf, f, sort_keys=True)
print(f"node agent configuration written ({dest}, 0600)")
PY
}

final_report() {
  local answer
  answer=$(post /api/v1/node-bootstrap/report "$(report_json succeeded "")")
  echo "platform: $answer"
  case "$answer" in
    200\ *) status_file succeeded ""; rm -f "$ENROLL_JSON"; echo "final report accepted; token file removed" ;;
    *) echo "final report refused"; return 1 ;;
  esac
}

main() {
  [ -f "$BUNDLE_JSON" ] || { log "no $BUNDLE_JSON: nothing to run"; exit 1; }
  GPUAAS_DIGEST=$(json_get "$BUNDLE_JSON" sha256)
  export GPUAAS_DIGEST
  BUNDLE_DIR="$BUNDLES/$GPUAAS_DIGEST"
  export BUNDLE_DIR
  # the profile's post-deploy validation bundle, when the deploy names one: its validation scripts run
  VALIDATION_DIGEST=$(python3 -c 'import json,sys; print((json.load(open(sys.argv[1])).get("validation") or {}).get("sha256", ""))' "$BUNDLE_JSON")
  VALIDATION_DIR="$BUNDLE_DIR"
  [ -n "$VALIDATION_DIGEST" ] && VALIDATION_DIR="$BUNDLES/$VALIDATION_DIGEST"
  export VALIDATION_DIGEST VALIDATION_DIR
  if step_ok report; then
    log "enrolled earlier with bundle $GPUAAS_DIGEST: nothing to do"
    exit 0
  fi
  [ -f "$ENROLL_JSON" ] || { log "no $ENROLL_JSON and not enrolled: the node cannot enroll; redeploy it"; exit 1; }
  log "bundle $(json_get "$BUNDLE_JSON" ref) sha256 $GPUAAS_DIGEST"
  run_step fetch fetch
  local s name
  for s in "$BUNDLE_DIR"/steps/*.sh; do
    [ -e "$s" ] || continue
    name=$(basename "$s" .sh)
    run_step "${name#[0-9][0-9]-}" bundle_script "$s"
  done
  if [ -n "$VALIDATION_DIGEST" ]; then
    log "validation bundle $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["validation"].get("ref", "?"))' "$BUNDLE_JSON") sha256 $VALIDATION_DIGEST"
    run_step fetch-validation fetch validation
  fi
  for s in "$VALIDATION_DIR"/validation/*.sh; do
    [ -e "$s" ] || continue
    name=$(basename "$s" .sh)
    run_step "validate-${name#[0-9][0-9]-}" bundle_script "$s"
  done
  run_step enroll enroll
  run_step agent-install agent_install
  run_step report final_report
  log "done: bundle $GPUAAS_DIGEST applied, validated, enrolled, node agent installed"
}

exec 9>"$WORK/launcher.lock"
flock -n 9 || { log "another launcher holds $WORK/launcher.lock"; exit 1; }
main
