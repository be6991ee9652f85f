"""The runners' Pulumi CLI in the lab: the build the tests use (build/pulumi/bin, tools/pulumi-cli/setup.sh)
packed as the official release is (`pulumi-v<version>-linux-x64.tar.gz` holding `pulumi/pulumi` and its
plugins), so the `runner` role installs in the lab exactly what it installs from a site's mirror.

Not a stand-in: it is the real CLI. It is not reproducible byte for byte across machines (a Go build), so
its sha256 is taken here and pinned inline by the lab tier; the pack is cached per binary."""

from __future__ import annotations

import hashlib
import re
import tarfile
from pathlib import Path

from pydantic import BaseModel, ConfigDict

REPO_ROOT = Path(__file__).resolve().parents[1]
BIN = REPO_ROOT / "build" / "pulumi" / "bin"
GO_MOD = REPO_ROOT / "tools" / "pulumi-cli" / "go.mod"


class CliPack(BaseModel):
    model_config = ConfigDict(frozen=True)
    path: Path
    sha256: str
    version: str


def cli_version() -> str:
    m = re.search(r"^\s*github\.com/pulumi/pulumi/pkg/v3 v(\S+)", GO_MOD.read_text(), re.M)
    if m is None:
        raise RuntimeError(f"no pulumi pkg/v3 require in {GO_MOD}")
    return m.group(1)


def pack_cli(cache: Path, bin_dir: Path = BIN) -> CliPack:
    """build/pulumi/bin as the release tarball, under `cache` (rebuilt when the binary changes)."""
    binary = (bin_dir / "pulumi").resolve()
    if not binary.is_file():
        raise RuntimeError(f"no Pulumi CLI at {bin_dir} (run `make setup`)")
    version = cli_version()
    stat = binary.stat()
    key = hashlib.sha256(f"{binary}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    out = cache / f"pulumi-cli-{key}" / f"pulumi-v{version}-linux-x64.tar.gz"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp")
        with tarfile.open(tmp, "w:gz", compresslevel=1) as tar:
            for entry in sorted(bin_dir.iterdir()):
                info = tar.gettarinfo(str(entry.resolve()), arcname=f"pulumi/{entry.name}")
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                with entry.resolve().open("rb") as src:
                    tar.addfile(info, src)
        tmp.rename(out)
    digest = hashlib.sha256()
    with out.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return CliPack(path=out, sha256=digest.hexdigest(), version=version)
