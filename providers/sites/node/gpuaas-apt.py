#!/usr/bin/python3
"""gpuaas-apt: the vendor apt repositories of a site bundle, on the node (docs/node-bootstrap.md, step "packages").

  gpuaas-apt.py add                       each source of apt/sources.json: its signing key downloaded through the
                                          presigned URL the deploy put in /etc/gpuaas/bundle.json (`apt_keys`),
                                          refused unless its OpenPGP fingerprint is the declared one, written to
                                          /etc/apt/keyrings/gpuaas-<name>.asc; the source written as
                                          /etc/apt/sources.list.d/gpuaas-<name>.sources with Signed-By that key
  gpuaas-apt.py explain update|install <apt log> [<package>...]
                                          what apt said, per source and package: "package X (apt source S: URL
                                          SUITE COMPONENTS) ..." and what to do
Every failure names the source (and the packages that need it) and exits 1.
"""

import base64
import hashlib
import json
import os
import re
import sys
import urllib.error

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("GPUAAS_ROOT", "")
KEYRINGS = ROOT + "/etc/apt/keyrings"
LISTS = ROOT + "/etc/apt/sources.list.d"


def sources():
    with open(os.path.join(HERE, "sources.json")) as f:
        return json.load(f)["sources"]


def describe(src):
    return f"apt source {src['name']} ({src['url']} {src['suite']} {' '.join(src['components'])})".replace(" )", ")")


def needs(src):
    return f"; packages that need it: {', '.join(src['packages'])}" if src["packages"] else ""


def fingerprint(data):
    """The v4 fingerprint of the first public-key packet of an OpenPGP key (ASCII-armored or binary)."""
    text = data.decode("ascii", "replace")
    if "-----BEGIN PGP PUBLIC KEY BLOCK-----" in text:
        body = text.split("-----BEGIN PGP PUBLIC KEY BLOCK-----", 1)[1].split("-----END PGP PUBLIC KEY BLOCK-----")[0]
        lines = body.strip().splitlines()
        while lines and ":" in lines[0]:  # armor headers (Comment: ..., Version: ...)
            lines.pop(0)
        b64 = "".join(ln.strip() for ln in lines if ln.strip() and not ln.startswith("="))
        data = base64.b64decode(b64)
    if not data or not data[0] & 0x80:
        raise ValueError("not an OpenPGP key")
    tag, i = data[0], 1
    if tag & 0x40:  # new-format packet header
        kind, first = tag & 0x3F, data[1]
        if first < 192:
            length, i = first, 2
        elif first < 224:
            length, i = ((first - 192) << 8) + data[2] + 192, 3
        else:
            length, i = int.from_bytes(data[2:6], "big"), 6
    else:  # old format
        kind, ltype = (tag >> 2) & 0x0F, tag & 0x03
        size = {0: 1, 1: 2, 2: 4}.get(ltype)
        if size is None:
            raise ValueError("indeterminate packet length")
        length, i = int.from_bytes(data[1:1 + size], "big"), 1 + size
    if kind != 6:
        raise ValueError(f"first packet is of type {kind}, not a public key")
    body = data[i:i + length]
    if not body or body[0] != 4:
        raise ValueError(f"public key packet version {body[0] if body else '?'} (only v4 keys are read)")
    return hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body).hexdigest().upper()


def fetch_key(src, keys):
    from gpuaas_https import TlsUntrusted, urlopen  # the launcher's https (its CAs): PYTHONPATH has it

    pin = keys.get(src["name"])
    if not pin or not pin.get("url"):
        sys.exit(f"{describe(src)}: the deploy carried no URL for its signing key ({src['key_ref']}): the machine's "
                 f"deploy inputs name no key for this source; run up again{needs(src)}")
    ref = pin.get("ref") or src["key_ref"]  # what the deploy presigned (the same object, named by the environment)
    try:
        with urlopen(pin["url"], f"signing key of {describe(src)}") as r:
            return r.read()
    except TlsUntrusted as e:
        sys.exit(f"{e}{needs(src)}")
    except urllib.error.HTTPError as e:
        body = e.read().decode("utf-8", "replace")
        code = re.search(r"<Code>(.*?)</Code>", body)
        missing = " is missing from the artifact store" if e.code == 404 else " could not be downloaded"
        sys.exit(f"{describe(src)}: its signing key {ref}{missing} (HTTP {e.code}"
                 f"{': ' + code.group(1) if code else ''}); upload the key there (or fix signing_key.object)"
                 f"{needs(src)}")
    except OSError as e:
        sys.exit(f"{describe(src)}: its signing key {ref}: artifact store unreachable ({type(e).__name__}: "
                 f"{e}){needs(src)}")


def write(path, text, mode):
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(text if isinstance(text, bytes) else text.encode())
    os.chmod(path + ".tmp", mode)
    os.replace(path + ".tmp", path)


def add():
    with open(os.environ["GPUAAS_BUNDLE_JSON"]) as f:
        keys = json.load(f).get("apt_keys") or {}
    for src in sources():
        key = fetch_key(src, keys)
        try:
            got = fingerprint(key)
        except (ValueError, IndexError) as e:
            sys.exit(f"{describe(src)}: its signing key {src['key_ref']} is not an OpenPGP public key ({e})"
                     f"{needs(src)}")
        if got != src["fingerprint"]:
            sys.exit(f"{describe(src)}: its signing key {src['key_ref']} has fingerprint {got}, the environment "
                     f"declares {src['fingerprint']}; upload the right key or fix signing_key.fingerprint{needs(src)}")
        keyring = f"/etc/apt/keyrings/gpuaas-{src['name']}.asc"
        write(ROOT + keyring, key, 0o644)
        entry = ["Types: deb", f"URIs: {src['url']}", f"Suites: {src['suite']}"]
        if src["components"]:
            entry.append(f"Components: {' '.join(src['components'])}")
        entry.append(f"Signed-By: {keyring}")
        write(f"{LISTS}/gpuaas-{src['name']}.sources", "# gpuaas bundle: vendor apt source\n" + "\n".join(entry) + "\n",
              0o644)
        print(f"{describe(src)}: key {got} verified; added")


def explain(what, log, packages):
    text = open(log, errors="replace").read()
    srcs = sources()
    lines = [ln for ln in text.splitlines() if ln.startswith(("E:", "W:", "Err:"))]
    out = []
    if what == "update":
        for src in srcs:
            mine = [ln for ln in lines if src["url"].rstrip("/") in ln]
            if mine:
                out.append(f"{describe(src)}: {mine[-1].strip()}{needs(src)}")
    else:
        owner = {p: s for s in srcs for p in s["packages"]}
        for ln in lines:
            m = re.search(r"Unable to locate package (\S+)|Package '?([^' ]+)'? has no installation candidate", ln)
            if m:
                pkg = m.group(1) or m.group(2)
                src = owner.get(pkg)
                names = ", ".join(s["name"] for s in srcs) or "none"
                where = describe(src) if src else f"no apt source of this profile lists it (sources: {names})"
                out.append(f"package {pkg} not found: {where}; fix the package name or its source")
    for line in out or [f"apt-get {what} failed: {lines[-1] if lines else 'see its output above'}"]:
        print(line)
    return 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["add"]:
        add()
    elif sys.argv[1:2] == ["explain"]:
        sys.exit(explain(sys.argv[2], sys.argv[3], sys.argv[4:]))
    else:
        sys.exit(__doc__)
