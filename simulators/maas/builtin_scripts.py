"""MAAS's default scripts, as the simulator registers them: the names, types and tags MAAS has, so script
selection by name or tag matches, and bodies that are the simulator's STAND-INS (MAAS's real built-ins
install lldpd, read the hardware through machine-resources, run smartctl...; none of that exists on a lab
node). On the NSPAWN backend they run on the commissioning node like any registered script, print what
they stand for and pass; the scripts a site registers are the ones that test something real."""

from __future__ import annotations

from .state import Script

_STANDIN = """#!/bin/sh
# MAAS simulator STAND-IN for MAAS's built-in script {name}: {what}
echo "{name} (MAAS simulator stand-in): {what}"
{body}"""

# name, script type (0 commissioning, 2 testing, 3 release), tags, what it stands for, its shell body
_BUILTINS: list[tuple[str, int, list[str], str, str]] = [
    ("20-maas-01-install-lldpd", 0, ["node"], "lldpd is not installed on a lab node", ""),
    ("20-maas-03-machine-resources", 0, ["node"], "the hardware as the node sees it",
     'echo "cpus: $(nproc)"; grep -m1 MemTotal /proc/meminfo; ls /sys/class/net | tr "\\n" " "; echo\n'
     'for d in /dev/sd? /dev/nvme?n?; do [ -e "$d" ] && echo "block device: $d"; done; true\n'),
    ("50-maas-01-commissioning", 0, ["node"], "the node's identity", 'echo "hostname: $(hostname)"\n'),
    ("update_firmware", 0, ["update_firmware"], "no firmware to update in the lab", ""),
    ("configure_hba", 0, ["configure_hba"], "no HBA to configure in the lab", ""),
    ("smartctl-validate", 2, ["commissioning", "storage"], "lab disks are loop devices without SMART data",
     'for d in /dev/sd? /dev/nvme?n?; do [ -e "$d" ] && echo "$d: no SMART data (loop device), skipped"; done; true\n'),
    ("memtester", 2, ["memory"], "no memory test in the lab", ""),
    ("stress-ng-cpu-short", 2, ["cpu"], "no CPU stress test in the lab", ""),
    ("fio", 2, ["storage"], "no disk benchmark in the lab", ""),
    ("wipe-disks", 3, ["wipe"], "release scripts do not run on lab nodes", ""),
]


def builtin_scripts() -> list[Script]:
    """The default scripts (ids 1..N, `default`: MAAS refuses to delete them)."""
    return [Script(id=n + 1, name=name, script_type=stype, tags=list(tags), default=True,
                   script=_STANDIN.format(name=name, what=what, body=body).encode())
            for n, (name, stype, tags, what, body) in enumerate(_BUILTINS)]
