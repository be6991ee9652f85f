"""The launcher as a real script (bash), against a temporary root, moto's S3 server and the platform
simulator (tests/node/conftest.py): success, each fault, a restart mid-run, and what stays secret."""

from __future__ import annotations

import contextlib
import json
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from clients.platform.models import BootstrapOutcome, NodeStatus
from simulators.platform import ErrorBurst, FaultPlan
from tests.fixtures.platform_sim import platform_sim_factory  # noqa: F401

from .conftest import DEVICES, NODE_TOKEN_TTL_S, Node, NodeWorld, world_at

STEPS = ["fetch", "packages", "cloud-init", "storage", "fabric", "hw-sync", "mounts",
         "validate-gpu-check", "validate-fabric-state"]
AFTER_ENROLL = ["agent-install"]  # reported in the final report (the enrollment's report says "enrolled")


def secret_files(node: Node) -> list[Path]:
    """Every file under the node's root that holds the token or the presigned URL's signature."""
    signature = node.url.split("X-Amz-Signature=")[1]
    found = []
    for p in node.root.rglob("*"):
        if p.is_file() and not p.is_symlink():
            text = p.read_bytes()
            if node.token.encode() in text or signature.encode() in text:
                found.append(p)
    return found


def assert_private(node: Node) -> None:
    for p in secret_files(node):
        mode = stat.S_IMODE(p.stat().st_mode)
        assert mode & 0o077 == 0, f"{p.relative_to(node.root)} holds a secret and is {oct(mode)}"
    for p in (node.root / "var/lib/gpuaas").rglob("*"):
        assert stat.S_IMODE(p.stat().st_mode) & 0o077 == 0, f"{p.relative_to(node.root)} is readable by others"


def assert_no_secret_in_output(node: Node) -> None:
    for proc in node.runs:
        for stream in (proc.stdout, proc.stderr):
            assert node.token not in stream and node.url not in stream


def test_a_node_fetches_verifies_runs_every_step_once_and_enrolls(node_world: NodeWorld) -> None:
    node = node_world.deploy()
    assert_private(node)  # before the run: enrollment.json, bundle.json, the launcher
    proc = node.run()
    assert proc.returncode == 0, proc.stderr[-2000:]
    steps = node.steps()
    assert list(steps) == sorted([*STEPS, "enroll", *AFTER_ENROLL, "report"]) and all(s["ok"] for s in steps.values())
    assert not (node.root / "etc/gpuaas/enrollment.json").exists(), "the token file is gone"
    record = node_world.node_record(node.node_id)
    assert record.bootstrap is not None and record.bootstrap.outcome is BootstrapOutcome.SUCCEEDED
    assert record.bootstrap.bundle_digest == node_world.bundle_digest  # the digest the deploy pinned
    assert [s.step for s in record.bootstrap.steps] == [*STEPS, *AFTER_ENROLL], "reported in the order they ran"
    # the node agent the enrollment answer named: verified, installed, its unit enabled and started
    agent = node_world.platform.agent_package
    assert agent is not None and agent.sha256 in steps["agent-install"]["output_tail"]
    assert (node.root / "usr/local/sbin/gpuaas-node-agent").read_text().count("LAB STAND-IN") == 1
    assert (node.root / "etc/systemd/system/gpuaas-node-agent.service").exists()
    assert "systemctl enable --now gpuaas-node-agent.service" in node.calls()
    # the agent's configuration holds its own credential (0600 root, in a 0700 directory); the answer that
    # carried it is gone; its heartbeat record is public and holds no credential
    conf_path = node.root / "etc/gpuaas-node-agent/agent.json"
    conf = json.loads(conf_path.read_text())
    assert stat.S_IMODE(conf_path.stat().st_mode) == 0o600 and stat.S_IMODE(conf_path.parent.stat().st_mode) == 0o700
    assert conf["node_id"] == node.node_id and conf["agent_credential"].startswith("gpuaas-agent-")
    assert not (node.root / "var/lib/gpuaas/enrollment-answer.json").exists()
    beat = (node.root / "var/lib/gpuaas-node-agent/heartbeat.json").read_text()
    assert json.loads(beat)["ok"] is True and conf["agent_credential"] not in beat
    # active because the platform saw the agent alive (its heartbeat), not by a timer
    record = node_world.admin.wait_for_node(node.node_id, timeout_s=10)
    assert record.status is NodeStatus.ACTIVE and record.agent is not None and record.agent.heartbeats == 1
    assert record.agent.version == "0.0.1-lab"
    # the report names the validation bundle that ran: the site bundle's own (the profile names no other)
    assert record.bootstrap is not None and record.bootstrap.validation_bundle_digest == node_world.bundle_digest
    assert record.bootstrap.validation_bundle_ref == node_world.bundle_ref
    assert node_world.platform.enroll_caller(node.node_id) == "127.0.0.1"  # the launcher's own request
    # the storage personality: one labelled filesystem and one enabled mount unit per data device
    units = sorted(p.name for p in (node.root / "etc/systemd/system").glob("share*.mount"))
    assert units == [f"share{i}.mount" for i in range(len(DEVICES))]
    assert "What=/dev/disk/by-label/share3" in (node.root / "etc/systemd/system/share3.mount").read_text()
    assert f"systemctl enable --now share{len(DEVICES) - 1}.mount" in node.calls()
    # hardware sync: MAAS's own timer (its interval is MAAS's region setting), enabled; the bundle pins none
    assert "systemctl enable --now maas_hardware_sync.timer" in node.calls()
    assert not (node.root / "etc/systemd/system/maas_hardware_sync.timer.d").exists()
    assert_private(node)
    assert secret_files(node) == [node.root / "etc/gpuaas/bundle.json"], "only the (expiring) URL remains"
    # a second run (cloud-init runs runcmd once, but a rerun must be harmless): nothing runs again
    calls = node.calls()
    again = node.run()
    assert again.returncode == 0 and "nothing to do" in again.stderr and node.calls() == calls
    assert_no_secret_in_output(node)


def test_a_bundle_whose_digest_differs_is_refused_and_nothing_enrolls(node_world: NodeWorld) -> None:
    node = node_world.deploy(pinned_digest="0" * 64)
    proc = node.run()
    assert proc.returncode == 1
    assert "step fetch FAILED" in proc.stderr and "the user_data pins " + "0" * 64 in proc.stderr
    assert "packages" not in node.steps() and node.calls() == [], "no bundle step ran"
    assert not list((node.root / "opt/gpuaas/bundle").glob("*/steps")), "nothing was unpacked"
    record = node_world.node_record(node.node_id)
    assert record.status is NodeStatus.BOOTSTRAP_ISSUED and record.enrolled_at is None
    assert record.bootstrap is not None and record.bootstrap.failed_step == "fetch"
    assert (node.root / "etc/gpuaas/enrollment.json").exists(), "the unused token stays, 0600"
    assert_private(node)
    assert_no_secret_in_output(node)


def test_an_expired_presigned_url_names_the_step_and_what_to_do(node_world: NodeWorld) -> None:
    node = node_world.deploy(url_ttl=60)
    node_world.s3.skew_s = 120  # the node boots two minutes after the deploy presigned its URL
    proc = node.run()
    assert proc.returncode == 1
    assert "step fetch FAILED" in proc.stderr and "Request has expired" in proc.stderr
    assert "presigned URL expired" in proc.stderr
    assert "what to do: run `pulumi up` again" in proc.stderr and "freshly presigned bundle URL" in proc.stderr
    assert node_world.node_record(node.node_id).status is NodeStatus.BOOTSTRAP_ISSUED
    assert_no_secret_in_output(node)


def test_the_bucket_stays_private(node_world: NodeWorld) -> None:
    import requests

    unsigned = node_world.launcher_url.split("?")[0]
    assert requests.get(unsigned, timeout=5).status_code == 403


def test_a_failing_validation_script_stops_with_its_name_and_output_tail(node_world: NodeWorld) -> None:
    node = node_world.deploy()
    proc = node.run(GPUAAS_LAB_GPUS="7")  # the lab stand-in nvidia-smi shows 7 of 8 GPUs
    assert proc.returncode == 1
    assert "step validate-gpu-check FAILED: expected 8 GPUs, found 7" in proc.stderr
    assert "enroll" not in node.steps()
    record = node_world.node_record(node.node_id)
    assert record.status is NodeStatus.BOOTSTRAP_ISSUED
    assert record.bootstrap is not None and record.bootstrap.failed_step == "validate-gpu-check"
    assert record.bootstrap.steps[-1].output_tail.strip() == "expected 8 GPUs, found 7"
    assert_private(node)


def test_an_expired_token_is_the_enrollment_error(node_world: NodeWorld) -> None:
    node = node_world.deploy()
    node_world.platform.advance(NODE_TOKEN_TTL_S + 1)  # past the profile's token TTL
    proc = node.run()
    assert proc.returncode == 1
    # Once seen under heavy load: the storage step failed instead; the whole stderr says why next time.
    assert "step enroll FAILED" in proc.stderr and "401 enrollment_token_expired" in proc.stderr, proc.stderr
    assert all(node.steps()[s]["ok"] for s in STEPS), "every step before enrollment ran"
    assert node_world.node_record(node.node_id).status is NodeStatus.BOOTSTRAP_ISSUED
    assert_no_secret_in_output(node)


ENROLL_ROUTE = "/api/v1/node-bootstrap/enroll"
QUICK = {"GPUAAS_PLATFORM_BACKOFF_S": "0.05"}  # the launcher's backoff, shortened (about a minute on a node)


def test_platform_5xx_on_enrollment_are_retried_and_the_node_enrolls(node_world: NodeWorld) -> None:
    node = node_world.deploy()
    node_world.platform.inject(FaultPlan(error_bursts=[ErrorBurst(status=502, count=2, path_prefix=ENROLL_ROUTE,
                                                                  methods=["POST"])]))
    proc = node.run(**QUICK)
    assert proc.returncode == 0, proc.stderr[-3000:]
    tail = node.steps()["enroll"]["output_tail"]  # the step's own output: each retry, then the answer
    assert tail.count(f"platform {ENROLL_ROUTE}: 502") == 2 and "retrying in" in tail and "(attempt 3/6)" in tail, tail
    assert node_world.admin.wait_for_node(node.node_id, timeout_s=10).status is NodeStatus.ACTIVE
    assert_no_secret_in_output(node)


def test_an_enrollment_whose_answer_was_lost_gets_the_same_answer_again(node_world: NodeWorld) -> None:
    """The platform took the enrollment (the single-use token is used) and the answer was lost: the retry
    carries the same idempotency key, so the platform replays the answer (with the agent credential) instead
    of refusing a used token; the node agent installs and the node goes active."""
    node = node_world.deploy()
    node_world.platform.inject(FaultPlan(error_bursts=[ErrorBurst(status=502, count=1, path_prefix=ENROLL_ROUTE,
                                                                  methods=["POST"], after_commit=True)]))
    proc = node.run(**QUICK)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "enrollment_token_used" not in proc.stderr
    record = node_world.admin.wait_for_node(node.node_id, timeout_s=10)
    assert record.status is NodeStatus.ACTIVE and record.agent is not None and record.agent.heartbeats == 1


def test_a_platform_outage_past_the_retry_budget_stops_with_the_token_unused(node_world: NodeWorld) -> None:
    node = node_world.deploy()
    node_world.platform.inject(FaultPlan(error_bursts=[ErrorBurst(status=503, count=50, path_prefix=ENROLL_ROUTE,
                                                                  methods=["POST"])]))
    proc = node.run(GPUAAS_PLATFORM_ATTEMPTS="3", **QUICK)
    assert proc.returncode == 1
    assert "step enroll FAILED" in proc.stderr and "gave up after 3 attempts" in proc.stderr, proc.stderr[-3000:]
    assert node_world.node_record(node.node_id).status is NodeStatus.BOOTSTRAP_ISSUED  # a redeploy can enroll
    node_world.platform.clear_faults()
    again = node.run(**QUICK)  # the node restarted once the platform is back: it resumes and enrolls
    assert again.returncode == 0, again.stderr[-3000:]
    assert node_world.admin.wait_for_node(node.node_id, timeout_s=10).status is NodeStatus.ACTIVE
    assert_no_secret_in_output(node)


def test_a_node_restarted_mid_launcher_resumes_without_repeating_a_step(node_world: NodeWorld) -> None:
    node = node_world.deploy()
    first = node.run(GPUAAS_TEST_KILL_AT="blkid")  # power lost at the storage step's first disk
    assert first.returncode != 0
    done = node.steps()
    assert sorted(done) == ["cloud-init", "fetch", "packages"] and all(s["ok"] for s in done.values())
    second = node.run()
    assert second.returncode == 0, second.stderr[-2000:]
    for step in ("fetch", "packages", "cloud-init"):
        assert f"step {step}: recorded ok earlier, skipped" in second.stderr
    calls = node.calls()
    assert calls.count("apt-get update -q") == 1, "the packages step ran once"
    assert sum(c.startswith("cloud-init --file") for c in calls) == 2, "2 parts, the one module each uses, once"
    assert sum(c.startswith("mkfs.ext4") for c in calls) == len(DEVICES), "each disk formatted once"
    assert node_world.admin.wait_for_node(node.node_id, timeout_s=10).status is NodeStatus.ACTIVE
    assert_private(node)


def test_the_apt_lists_lock_held_at_first_boot_is_waited_for_whatever_the_nodes_locale(node_world: NodeWorld) -> None:
    """apt-daily holds the lists lock at a fresh node's first boot: the packages step retries `apt-get update`
    while apt says the lock is held. It reads apt's English message, so it runs apt under the C locale: on a
    German node (the double answers in German unless the locale is C) it still waits, rather than failing."""
    node = node_world.deploy()
    proc = node.run(LANG="de_DE.UTF-8", LC_ALL="", GPUAAS_TEST_APT_LOCKED="1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert node.calls().count("apt-get update -q") == 2, "refused once (lock held), then updated"
    assert node.steps()["packages"]["ok"]


def test_a_node_agent_package_whose_digest_differs_is_refused_and_reported(node_world: NodeWorld) -> None:
    """The enrollment answer names an agent package whose bytes do not match its sha256: step
    agent-install fails naming both digests and what to do, nothing is installed, the final report says so."""
    offered = node_world.platform.agent_package
    assert offered is not None
    node_world.platform.offer_agent_package(offered.model_copy(update={"sha256": "0" * 64}))
    node = node_world.deploy()
    proc = node.run()
    assert proc.returncode == 1
    assert "step agent-install FAILED" in proc.stderr
    assert f"its sha256 is {offered.sha256}, the platform's enrollment answer names {'0' * 64}" in proc.stderr
    assert "what to do: the node agent package the platform names" in proc.stderr
    assert not (node.root / "usr/local/sbin/gpuaas-node-agent").exists(), "nothing installed"
    assert not any("gpuaas-node-agent" in c for c in node.calls())
    record = node_world.node_record(node.node_id)
    assert record.bootstrap is not None and record.bootstrap.outcome is BootstrapOutcome.FAILED
    assert record.bootstrap.failed_step == "agent-install"
    assert "refused" in record.bootstrap.steps[-1].output_tail
    assert not (node.root / "etc/gpuaas/enrollment.json").exists(), "the used token's one final report is sent"
    assert_private(node)
    assert_no_secret_in_output(node)


def test_a_separate_validation_bundle_runs_its_own_validation_scripts(node_world: NodeWorld) -> None:
    """The profile's post-deploy validation bundle (expects 6 GPUs, the site bundle 8): fetched through
    its own presigned URL, verified, and its validation scripts run (6 GPUs shown: the site bundle's
    check would fail); the node enrolls."""
    pin = node_world.publish("lab-h200-validate", expected_gpus=6)
    node = node_world.deploy(validation=pin)
    proc = node.run(GPUAAS_LAB_GPUS="6")
    assert proc.returncode == 0, proc.stderr[-2000:]
    steps = node.steps()
    assert steps["fetch-validation"]["ok"] and pin.digest in steps["fetch-validation"]["output_tail"]
    assert f"validation bundle {pin.ref} sha256 {pin.digest}" in proc.stderr
    assert (node.root / f"opt/gpuaas/bundle/{pin.digest}/validation/10-gpu-check.sh").exists()
    record = node_world.node_record(node.node_id)
    assert record.bootstrap is not None and record.bootstrap.outcome is BootstrapOutcome.SUCCEEDED
    ran = [s.step for s in record.bootstrap.steps]
    assert ran.index("mounts") < ran.index("fetch-validation") < ran.index("validate-gpu-check")
    assert_no_secret_in_output(node)


def test_a_failing_script_of_the_validation_bundle_stops_the_node(node_world: NodeWorld) -> None:
    pin = node_world.publish("lab-h200-validate", expected_gpus=9)
    node = node_world.deploy(validation=pin)
    proc = node.run()  # 8 GPUs: the site bundle's check would pass, the validation bundle's does not
    assert proc.returncode == 1
    assert "step validate-gpu-check FAILED: expected 9 GPUs, found 8" in proc.stderr
    assert "enroll" not in node.steps()


def test_a_validation_bundle_whose_digest_differs_is_refused(node_world: NodeWorld) -> None:
    pin = node_world.publish("lab-h200-validate", expected_gpus=8)
    bad = node_world.deploy(validation=pin.model_copy(update={"digest": "0" * 64}))
    proc = bad.run()
    assert proc.returncode == 1 and "step fetch-validation FAILED" in proc.stderr
    assert f"its sha256 is {pin.digest}, the user_data pins {'0' * 64}" in proc.stderr
    assert "validate-gpu-check" not in bad.steps() and "enroll" not in bad.steps()
    assert_no_secret_in_output(bad)


RUNCMD_PART = "cloud-init/40-lab-runcmd.yaml"


@pytest.fixture
def runcmd_world(tmp_path: Path, platform_sim_factory: Any) -> Iterator[Callable[[str], NodeWorld]]:  # noqa: F811
    """A world whose bundle carries one more cloud-init part with the given runcmd (YAML list)."""
    with contextlib.ExitStack() as stack:

        def make(runcmd: str) -> NodeWorld:
            part = f"#cloud-config\nruncmd:\n{runcmd}".encode()
            return stack.enter_context(world_at(tmp_path, platform_sim_factory(), extra_files={RUNCMD_PART: part}))

        yield make


def test_a_cloud_init_parts_runcmd_runs_once_and_the_deploys_runcmd_stays(runcmd_world: Any) -> None:
    world = runcmd_world('  - [sh, -c, \'echo "runcmd ran $((1 + 1))" >> "$GPUAAS_ROOT/etc/gpuaas/runcmd.out"\']\n'
                         "  - echo second command\n")
    node = world.deploy()
    scripts = node.root / "var/lib/cloud/instance/scripts"
    scripts.mkdir(parents=True)
    (scripts / "runcmd").write_text("#!/bin/sh\nexec the-deploys-launcher\n")  # what cloud-init wrote at boot
    proc = node.run()
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (node.root / "etc/gpuaas/runcmd.out").read_text() == "runcmd ran 2\n", "ran once, by a shell"
    tail = node.steps()["cloud-init"]["output_tail"]
    assert "second command" in tail and "ran runcmd of 40-lab-runcmd.yaml" in tail
    assert (scripts / "runcmd").read_text() == "#!/bin/sh\nexec the-deploys-launcher\n", "the deploy's runcmd is back"
    assert "cloud-init --file" in "\n".join(node.calls()) and any(
        c.endswith("single --name runcmd --frequency always") for c in node.calls())


def test_a_failing_runcmd_fails_the_cloud_init_step_with_its_tail(runcmd_world: Any) -> None:
    world = runcmd_world("  - [sh, -c, 'echo disk quota broken >&2; exit 3']\n")
    node = world.deploy()
    proc = node.run()
    assert proc.returncode == 1
    assert "step cloud-init FAILED" in proc.stderr
    tail = node.steps()["cloud-init"]["output_tail"]
    assert "disk quota broken" in tail and "runcmd of 40-lab-runcmd.yaml failed (exit 3)" in tail
    assert "storage" not in node.steps() and "enroll" not in node.steps()
    record = world.node_record(node.node_id)
    assert record.bootstrap is not None and record.bootstrap.failed_step == "cloud-init"
