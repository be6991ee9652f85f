#!/bin/bash
# Test double of a node OS tool (tests/node): the launcher's tests run against a temporary root on the
# test host, where apt-get, cloud-init, disks and systemd must not be touched. Each call is logged to
# $GPUAAS_ROOT/var/log/fake-os-calls.log; disks live as files under $GPUAAS_ROOT/.fake-disks/.
set -u
tool=$(basename "$0")
R="${GPUAAS_ROOT:?fake $tool needs GPUAAS_ROOT}"
mkdir -p "$R/var/log" "$R/.fake-disks/labels"
echo "$tool $*" >> "$R/var/log/fake-os-calls.log"
if [ -n "${GPUAAS_TEST_KILL_AT:-}" ] && [ "$GPUAAS_TEST_KILL_AT" = "$tool" ] && [ ! -e "$R/.killed" ]; then
  touch "$R/.killed"
  kill -KILL 0  # the whole process group: the launcher, its step, this call (a node losing power)
fi
case "$tool" in
  apt-get)  # GPUAAS_TEST_APT_LOCKED=<n>: the first n `apt-get update` find the lists lock held (apt-daily at a first
    # boot) and say so, as apt does, in the caller's language: English only under the C locale
    held=$(cat "$R/.apt-lock-refusals" 2>/dev/null || echo 0)
    if [ "${1:-}" = "update" ] && [ "$held" -lt "${GPUAAS_TEST_APT_LOCKED:-0}" ]; then
      echo $((held + 1)) > "$R/.apt-lock-refusals"
      case "${LC_ALL:-${LC_MESSAGES:-${LANG:-}}}" in
        C|C.*|POSIX) echo "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 812 (apt-get)" ;;
        *) echo "E: Sperre /var/lib/apt/lists/lock konnte nicht erlangt werden. Sie wird von Prozess 812 (apt-get) gehalten." ;;
      esac
      exit 100
    fi ;;
  sfdisk)  # `printf '<script>' | sfdisk -q /dev/<dev>`: read the script as sfdisk does; a double that exits without
    # reading lets the writer die of SIGPIPE, which `set -o pipefail` turns into a silent step failure (seen once)
    cat > /dev/null ;;
  blkid)  # blkid -L <label>
    [ -e "$R/.fake-disks/labels/$2" ] ;;
  lsblk)  # lsblk -ln -o NAME,TYPE /dev/<dev>
    dev=$(basename "${!#}"); printf '%s disk\n%sp1 part\n' "$dev" "$dev" ;;
  mkfs.ext4)  # mkfs.ext4 -q -L <label> /dev/<part>
    label=""; while [ $# -gt 0 ]; do [ "$1" = "-L" ] && label=$2; shift; done
    echo "fake" > "$R/.fake-disks/labels/$label" ;;
  cloud-init)  # cloud-init --file <part> single --name <module> --frequency always: runcmd is written as
    # cloud-init writes it (util.shellify: a string as is, a list shell-quoted) to the instance's scripts/runcmd
    if [ "${4:-}" = "--name" ] && [ "${5:-}" = "runcmd" ]; then
      mkdir -p "$R/var/lib/cloud/instance/scripts"
      python3 - "$2" "$R/var/lib/cloud/instance/scripts/runcmd" <<'PY'
import os, shlex, sys, yaml
cmds = (yaml.safe_load(open(sys.argv[1])) or {}).get("runcmd") or []
lines = ["#!/bin/sh"] + [c if isinstance(c, str) else " ".join(shlex.quote(str(a)) for a in c) for c in cmds]
open(sys.argv[2], "w").write("\n".join(lines) + "\n")
os.chmod(sys.argv[2], 0o700)
PY
    fi ;;
  systemctl)  # `enable --now <unit>` of the node agent: its one heartbeat (a temporary root runs no services)
    # GPUAAS_TEST_AGENT_DEAD: the unit "starts" but the agent never runs (a node the platform never sees alive)
    if [ "${1:-}" = "enable" ] && [ "${2:-}" = "--now" ] && [ "${3:-}" = "gpuaas-node-agent.service" ] &&
       [ -x "$R/usr/local/sbin/gpuaas-node-agent" ] && [ -z "${GPUAAS_TEST_AGENT_DEAD:-}" ]; then
      GPUAAS_ROOT="$R" "$R/usr/local/sbin/gpuaas-node-agent" --once
    fi ;;
  *) exit 0 ;;
esac
