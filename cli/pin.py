"""`gpuaas-infra pin <file-or-url>`: url + sha256 of a host artifact, for an environment's pins file.

    gpuaas-infra pin ./k3s --url https://mirror/.../k3s                      # prints  {url: ..., sha256: ...}
    gpuaas-infra pin https://mirror/.../k3s --name k3s --pins environments/pins/staging.yaml
    gpuaas-infra pin ./pulumi-v3.274.1-linux-x64.tar.gz --url ... --name pulumi_cli --version 3.274.1 --pins ...

A local file is hashed where it lies (`--url` names where the hosts fetch it: the mirror it was uploaded to);
a URL is downloaded (streamed, never kept) and hashed, so the pin is of exactly what the hosts will fetch.
With `--pins` and `--name` the entry's line in the pins file is replaced (or added under `artifacts:`),
keeping the file's comments; the file is then validated again (environments/pins.py).
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from pathlib import Path

import httpx
from pydantic import BaseModel, ConfigDict

from clients.tls import CaBundleError, trust
from environments.pins import ARTIFACTS, Pin, load_pins
from environments.pins import resolve as resolve_pins

CHUNK = 1 << 20
TIMEOUT_S = 30.0


class Digest(BaseModel):
    model_config = ConfigDict(frozen=True)

    sha256: str
    size: int


def digest_file(path: Path) -> Digest:
    h, size = hashlib.sha256(), 0
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            size += len(chunk)
    return Digest(sha256=h.hexdigest(), size=size)


def digest_url(url: str, ca_bundle: str | None = None, timeout: float = TIMEOUT_S) -> Digest:
    """Stream `url` and hash it (httpx errors, and `CaBundleError` for a CA bundle that cannot be loaded,
    propagate: the caller says what failed)."""
    h, size = hashlib.sha256(), 0
    with httpx.stream("GET", url, timeout=timeout, follow_redirects=True, verify=trust(ca_bundle)) as resp:
        resp.raise_for_status()
        for chunk in resp.iter_bytes(CHUNK):
            h.update(chunk)
            size += len(chunk)
    return Digest(sha256=h.hexdigest(), size=size)


def entry_line(name: str, pin: Pin) -> str:
    version = f", version: {pin.version}" if pin.version else ""
    # quoted: YAML would read a digest of digits only as an integer
    return f'  {name}: {{url: "{pin.url}", sha256: "{pin.sha256}"{version}}}'


def write_pin(pins_file: Path, name: str, pin: Pin) -> None:
    """Replace `name`'s line under `artifacts:` (or add it), keeping everything else of the file."""
    lines = pins_file.read_text().splitlines() if pins_file.exists() else ["artifacts:"]
    if not any(line.rstrip() == "artifacts:" for line in lines):
        lines.append("artifacts:")
    pattern = re.compile(rf"^\s+{re.escape(name)}:\s")
    at = next((i for i, line in enumerate(lines) if pattern.match(line)), None)
    if at is None:
        at = max(i for i, line in enumerate(lines) if line.rstrip() == "artifacts:" or line.startswith("  ")) + 1
        lines.insert(at, entry_line(name, pin))
    else:
        lines[at] = entry_line(name, pin)
    pins_file.write_text("\n".join(lines) + "\n")


def pin_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="gpuaas-infra pin", description=__doc__.splitlines()[0])
    parser.add_argument("source", help="the downloaded file, or the URL the hosts fetch it from")
    parser.add_argument("--url", help="where the hosts fetch it (required for a local file)")
    parser.add_argument("--name", choices=ARTIFACTS, help="the artifact's name in the pins file")
    parser.add_argument("--version", default="", help="its release (required for pulumi_cli)")
    parser.add_argument("--pins", help="the pins file to write the entry into (with --name)")
    parser.add_argument("--ca-bundle", help="PEM of the CA that signs the mirror's certificate")
    args = parser.parse_args(argv)
    is_url = args.source.startswith(("https://", "http://"))
    if not is_url and not args.url:
        parser.error("a local file needs --url: where the hosts fetch it")
    if args.pins and not args.name:
        parser.error("--pins needs --name")
    try:
        got = digest_url(args.source, args.ca_bundle) if is_url else digest_file(Path(args.source))
    except (OSError, CaBundleError, httpx.HTTPError) as e:
        sys.stderr.write(f"gpuaas-infra pin: cannot read {args.source}: {type(e).__name__}: {e}\n")
        return 1
    pin = Pin(url=args.url or args.source, sha256=got.sha256, version=args.version)
    print(entry_line(args.name or "artifact", pin).strip() + f"   # {got.size} bytes")
    if args.pins:
        path = resolve_pins(args.pins)
        write_pin(path, args.name, pin)
        _, bad = load_pins(path)
        if bad:
            sys.stderr.write("\n".join(f.render() for f in bad) + "\n")
            return 1
        print(f"wrote {args.name} into {args.pins}")
    return 0
