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
  blkid)  # blkid -L <label>
    [ -e "$R/.fake-disks/labels/$2" ] ;;
  lsblk)  # lsblk -ln -o NAME,TYPE /dev/<dev>
    dev=$(basename "${!#}"); printf '%s disk\n%sp1 part\n' "$dev" "$dev" ;;
  mkfs.ext4)  # mkfs.ext4 -q -L <label> /dev/<part>
    label=""; while [ $# -gt 0 ]; do [ "$1" = "-L" ] && label=$2; shift; done
    echo "fake" > "$R/.fake-disks/labels/$label" ;;
  *) exit 0 ;;
esac
