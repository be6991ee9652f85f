"""The node agent package the simulator offers in its enrollment response (a LAB STAND-IN agent,
`node_agent/`), built reproducibly: a gzipped tar of files under the node's root plus
`gpuaas-agent.json` (`{name, version, unit}`), the layout the launcher installs
(docs/node-bootstrap.md). Served unauthenticated at `/_sim/artifacts/node-agent/<sha256>.tar.gz`
(it holds no secret), as a real platform's artifact URL would be."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

from pydantic import BaseModel, ConfigDict

SOURCES = Path(__file__).resolve().parent / "node_agent"
VERSION = "0.0.1-lab"
UNIT = "gpuaas-node-agent.service"
ROUTE = "/_sim/artifacts/node-agent"


class AgentArtifact(BaseModel):
    model_config = ConfigDict(frozen=True)
    blob: bytes
    sha256: str
    version: str


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime, info.uid, info.gid = len(data), mode, 0, 0, 0
    tar.addfile(info, io.BytesIO(data))


def build(version: str = VERSION) -> AgentArtifact:
    """The package's bytes and sha256 (the same bytes for the same sources and version)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        manifest = {"name": "gpuaas-node-agent", "version": version, "unit": UNIT}
        _add(tar, "gpuaas-agent.json", json.dumps(manifest, sort_keys=True).encode(), 0o644)
        script = (SOURCES / "gpuaas-node-agent").read_text().replace("@VERSION@", version)
        _add(tar, "root/usr/local/sbin/gpuaas-node-agent", script.encode(), 0o755)
        _add(tar, f"root/etc/systemd/system/{UNIT}", (SOURCES / UNIT).read_bytes(), 0o644)
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as gz:
        gz.write(raw.getvalue())
    blob = out.getvalue()
    return AgentArtifact(blob=blob, sha256=hashlib.sha256(blob).hexdigest(), version=version)
