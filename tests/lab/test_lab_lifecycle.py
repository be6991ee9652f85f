"""lab itself: a lab leaves nothing behind — processes, mounts, namespaces, veths, run
directory — after a normal exit and after a failed start."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from lab import Lab, preflight
from lab import net as lab_net

pytestmark = [pytest.mark.lab]


def _leftovers(lab: Lab) -> list[str]:
    out = []
    if lab.run_dir.exists():
        out.append(f"run dir {lab.run_dir}")
    out += [f"netns {n}" for n in lab_net.netns_names() if lab.run_id in n]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    out += [f"link {line.split(':')[1].strip()}" for line in links.splitlines() if f"gpl{lab.run_id}" in line]
    out += [f"mount {line.split()[1]}" for line in Path("/proc/self/mounts").read_text().splitlines()
            if str(lab.run_dir) in line]
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    out += [f"process {line}" for line in ps.splitlines() if str(lab.run_dir) in line]
    return out


@pytest.fixture(autouse=True)
def _needs_lab() -> None:
    reason = preflight()
    if reason:
        pytest.skip(f"lab tier cannot run on this machine: {reason}")


def test_a_lab_boots_answers_over_ssh_and_leaves_nothing_behind() -> None:
    lab = Lab(["lab-probe-1"])
    with lab as info:
        assert info.ssh("lab-probe-1", "hostname").stdout.strip() == "lab-probe-1"
        assert info.hosts["lab-probe-1"] in info.subnet
    assert _leftovers(lab) == []


def test_a_failed_start_leaves_nothing_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(self: Lab, key: Path) -> None:
        raise RuntimeError("boom: simulated boot failure")

    monkeypatch.setattr(Lab, "_wait_ready", boom)
    lab = Lab(["lab-probe-2"])
    with pytest.raises(RuntimeError, match="simulated boot failure"), lab:
        pass
    assert _leftovers(lab) == []
