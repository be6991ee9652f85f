"""The platform enrollment hook: a machine reaching Deployed posts the enrollment found in its
user_data to the configured platform URL only, and records the outcome without the token."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from .conftest import connect

TOKEN = "enr-tok-7f3a9c1e55d2"
ENROLL_FILE = json.dumps({"node_id": "node-42", "enrollment_token": TOKEN})


class Recorder:
    """A real HTTP endpoint standing in for the platform API: records POSTs, answers as told."""

    def __init__(self, status: int = 200, reply: dict | None = None) -> None:
        self.posts: list[tuple[str, dict]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - stdlib name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                recorder.posts.append((self.path, json.loads(body)))
                out = json.dumps(reply or {"ok": True}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def platform() -> Iterator[Recorder]:
    rec = Recorder()
    yield rec
    rec.close()


def cloud_config(extra: str = "") -> bytes:
    return (f"#cloud-config\n{extra}write_files:\n  - path: /etc/gpuaas/enrollment.json\n"
            f"    permissions: '0600'\n    content: '{ENROLL_FILE}'\n").encode()


def wait_event(sim, hostname: str, prefix: str, timeout: float = 5.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for e in sim.admin.events(hostname):
            if e["type"].startswith(prefix):
                return e
        time.sleep(0.01)
    raise AssertionError(f"no {prefix} event for {hostname}: {sim.admin.events(hostname)}")


def test_cloud_config_enrollment_is_posted_and_recorded(maas_sim_factory, platform) -> None:
    sim = maas_sim_factory(platform_url=platform.url)
    machine = connect(sim).machines.list(hostnames=["gpu-a-001"])[0]
    machine.deploy(user_data=cloud_config(), wait=True, wait_interval=0.01)
    event = wait_event(sim, "gpu-a-001", "ENROLL")
    assert event["type"] == "ENROLL" and "status=200" in event["description"]
    assert platform.posts == [("/api/v1/node-bootstrap/enroll", {
        "node_id": "node-42", "enrollment_token": TOKEN, "hostname": "gpu-a-001",
        "system_id": machine.system_id})]
    assert TOKEN not in json.dumps(sim.admin.events("gpu-a-001"))
    assert TOKEN not in json.dumps(sim.admin.dump_state())


def test_mime_multipart_with_base64_file_and_platform_error(maas_sim_factory) -> None:
    rejecting = Recorder(status=409, reply={"error": {"code": "enrollment_token_used", "message": "used"}})
    try:
        sim = maas_sim_factory(platform_url=rejecting.url + "/")
        msg = MIMEMultipart()
        msg.attach(MIMEText("#!/bin/sh\necho launcher\n", "x-shellscript"))
        encoded = base64.b64encode(ENROLL_FILE.encode()).decode()
        msg.attach(MIMEText("#cloud-config\nwrite_files:\n  - path: /etc/gpuaas/enrollment.json\n"
                            f"    encoding: b64\n    content: {encoded}\n", "cloud-config"))
        machine = connect(sim).machines.list(hostnames=["gpu-a-002"])[0]
        machine.deploy(user_data=msg.as_bytes(), wait=True, wait_interval=0.01)
        event = wait_event(sim, "gpu-a-002", "ENROLL")
        assert event["type"] == "ENROLL_FAILED"
        assert "status=409" in event["description"] and "enrollment_token_used" in event["description"]
        assert rejecting.posts[0][1]["node_id"] == "node-42"
        assert TOKEN not in event["description"]
    finally:
        rejecting.close()


def test_only_the_configured_url_is_contacted(maas_sim_factory, platform) -> None:
    elsewhere = Recorder()
    try:
        sim = maas_sim_factory(platform_url=platform.url)
        user_data = cloud_config(extra=f"platform_url: {elsewhere.url}\n")
        machine = connect(sim).machines.list(hostnames=["gpu-a-001"])[0]
        machine.deploy(user_data=user_data, wait=True, wait_interval=0.01)
        wait_event(sim, "gpu-a-001", "ENROLL")
        assert len(platform.posts) == 1 and elsewhere.posts == []
    finally:
        elsewhere.close()


def test_no_platform_url_means_no_traffic_and_missing_file_is_recorded(maas_sim_factory, platform) -> None:
    quiet = maas_sim_factory()
    machine = connect(quiet).machines.list(hostnames=["gpu-a-001"])[0]
    machine.deploy(user_data=cloud_config(), wait=True, wait_interval=0.01)
    assert platform.posts == [] and not any(e["type"].startswith("ENROLL") for e in quiet.admin.events("gpu-a-001"))
    sim = maas_sim_factory(platform_url=platform.url)
    other = connect(sim).machines.list(hostnames=["gpu-a-002"])[0]
    other.deploy(user_data=b"#cloud-config\npackages: [jq]\n", wait=True, wait_interval=0.01)
    assert wait_event(sim, "gpu-a-002", "ENROLL")["type"] == "ENROLL_SKIPPED"
    assert platform.posts == []
