#!/usr/bin/python3
"""maas-run-scripts: the script runner of the MAAS simulator's commissioning environment (NSPAWN backend).

Written for the simulator, after the protocol of MAAS's own runner (maas-run-remote-scripts) and its
metadata API (canonical/maas `src/metadataserver/api.py`: `MAASScriptsHandler.read`, `signal`):

1. `GET <metadata_url>latest/maas-scripts`: a tar of the scripts still to run (`commissioning/<name>`,
   `testing/<name>`) and `index.json` (`{"1.0": {"commissioning_scripts": [...], "testing_scripts": [...]}}`,
   each with name, path, script_result_id, timeout_seconds); 204 when nothing is left.
2. Each script, by name: `signal status=WORKING` with its `script_result_id` (Running), then run it (as
   root, its own process; killed after its timeout: exit 124, TIMEDOUT) and `signal status=WORKING` with
   its `exit_status`, `runtime` and the files `<name>` (combined output), `<name>.out`, `<name>.err`.
3. Commissioning scripts first: any failure -> `signal status=FAILED error="<n> commissioning scripts
   failed to run"` and stop. Then the tar again (what is left: the testing scripts), `signal TESTING`, the
   testing scripts; any failure -> `FAILED "<n> test scripts failed to run"`. Else `signal OK`.

Every request is signed OAuth 1.0 PLAINTEXT with the node key from `--config` (a 0600 cloud.cfg.d drop-in:
`datasource: {MAAS: {metadata_url, consumer_key, token_key, token_secret}}`). The runner exits 0 once it
has signalled the outcome, whatever the scripts did (MAAS decides from the signals); non-zero only when it
could not reach MAAS (cloud-init's final stage then fails, which MAAS turns into Failed commissioning).
Python 3 standard library and PyYAML (cloud-init's dependency) only: it runs on the node.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import secrets
import selectors
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

TIMEOUT_EXIT = 124  # what timeout(1) exits with; MAAS records a timed-out script so


class Maas:
    def __init__(self, metadata_url: str, consumer_key: str, token_key: str, token_secret: str) -> None:
        self.url = metadata_url if metadata_url.endswith("/") else metadata_url + "/"
        self._consumer, self._token, self._secret = consumer_key, token_key, token_secret

    def _auth(self) -> str:
        fields = {"oauth_version": "1.0", "oauth_signature_method": "PLAINTEXT",
                  "oauth_consumer_key": self._consumer, "oauth_token": self._token,
                  "oauth_signature": f"&{self._secret}", "oauth_nonce": secrets.token_hex(8),
                  "oauth_timestamp": str(int(time.time()))}
        return "OAuth " + ", ".join(f'{k}="{v}"' for k, v in fields.items())

    def _open(self, req: urllib.request.Request) -> tuple[int, bytes]:
        req.add_header("Authorization", self._auth())
        for attempt in range(5):
            try:
                with urllib.request.urlopen(req, timeout=60) as resp:
                    return resp.status, resp.read()
            except urllib.error.HTTPError as e:
                raise SystemExit(f"maas-run-scripts: {req.get_method()} {req.full_url}: HTTP {e.code}: "
                                 f"{e.read()[:300].decode(errors='replace')}") from None
            except OSError as e:
                if attempt == 4:
                    raise SystemExit(f"maas-run-scripts: {req.full_url}: {e}") from None
                time.sleep(1 + attempt)
        raise AssertionError("unreachable")

    def scripts(self, into: Path) -> dict[str, Any] | None:
        """The scripts still to run, extracted under `into`; None when MAAS has none (204)."""
        status, body = self._open(urllib.request.Request(self.url + "latest/maas-scripts"))
        if status == 204 or not body:
            return None
        with tarfile.open(fileobj=io.BytesIO(body)) as tar:
            if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4 (or a distribution's backport)
                tar.extractall(into, filter="data")
            else:
                tar.extractall(into)  # noqa: S202 - MAAS's own tar, over the node's authenticated channel
        index: dict[str, Any] = json.loads((into / "index.json").read_text())["1.0"]
        return index

    def signal(self, status: str, error: str | None = None, files: dict[str, bytes] | None = None,
               **fields: Any) -> None:
        params = {"op": "signal", "status": status, **({"error": error} if error is not None else {}),
                  **{k: str(v) for k, v in fields.items() if v is not None}}
        boundary = secrets.token_hex(16)
        parts = [self._part(boundary, name, value.encode(), None) for name, value in params.items()]
        parts += [self._part(boundary, name, data, name) for name, data in (files or {}).items()]
        body = b"".join(parts) + f"--{boundary}--\r\n".encode()
        req = urllib.request.Request(self.url + "latest/", data=body, method="POST",
                                     headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
        self._open(req)

    @staticmethod
    def _part(boundary: str, name: str, data: bytes, filename: str | None) -> bytes:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        head = (f"--{boundary}\r\nContent-Disposition: {disposition}\r\n"
                "Content-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\n")
        return head.encode() + base64.encodebytes(data).replace(b"\n", b"\r\n") + b"\r\n"


def run_one(script: dict[str, Any], root: Path) -> tuple[int, dict[str, bytes], float, bool]:
    """(exit status, {"output", "stdout", "stderr"}, runtime seconds, timed out) of one script."""
    path = root / script["path"]
    path.chmod(0o755)
    timeout = float(script.get("timeout_seconds") or 0) or None
    out = {"output": b"", "stdout": b"", "stderr": b""}
    start = time.monotonic()
    try:
        proc = subprocess.Popen([str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=root,
                                env={**os.environ, "RUNTIME": str(int(timeout or 0))}, start_new_session=True)
    except OSError as e:
        message = f"Unable to execute {script['name']}: {e}\n".encode()
        return e.errno or 2, {"output": message, "stdout": b"", "stderr": message}, 0.0, False
    assert proc.stdout is not None and proc.stderr is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
    sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
    timed_out = False
    while sel.get_map():
        left = None if timeout is None else timeout - (time.monotonic() - start)
        if left is not None and left <= 0:
            timed_out = True
            os.killpg(proc.pid, 9)
            break
        for key, _ in sel.select(left):
            chunk = os.read(key.fileobj.fileno(), 65536)  # type: ignore[union-attr]
            if not chunk:
                sel.unregister(key.fileobj)
                continue
            out[key.data] += chunk
            out["output"] += chunk
    code = proc.wait()
    return (TIMEOUT_EXIT if timed_out else code), out, time.monotonic() - start, timed_out


def run_all(maas: Maas, scripts: list[dict[str, Any]], root: Path) -> int:
    """Run the scripts not yet finished, by name; the number that failed."""
    failed = 0
    for script in sorted(scripts, key=lambda s: s["name"]):
        if script.get("has_finished"):
            continue
        name, rid = script["name"], script["script_result_id"]
        print(f"maas-run-scripts: starting {name}", flush=True)
        maas.signal("WORKING", f"Starting {name}", script_result_id=rid, name=name)
        code, out, runtime, timed_out = run_one(script, root)
        files = {name: out["output"], f"{name}.out": out["stdout"], f"{name}.err": out["stderr"]}
        note = (f"Timeout({script.get('timeout_seconds')}s) expired on {name}" if timed_out
                else f"Finished {name}: {code}")
        print(f"maas-run-scripts: {note}", flush=True)
        maas.signal("TIMEDOUT" if timed_out else "WORKING", note, files, script_result_id=rid, name=name,
                    exit_status=code, runtime=f"{runtime:.2f}")
        failed += code != 0
    return failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="cloud.cfg.d drop-in holding datasource.MAAS")
    args = parser.parse_args()
    ds = yaml.safe_load(Path(args.config).read_text())["datasource"]["MAAS"]
    maas = Maas(ds["metadata_url"], ds["consumer_key"], ds["token_key"], ds["token_secret"])
    with tempfile.TemporaryDirectory(prefix="maas-scripts-") as tmp:
        first = maas.scripts(Path(tmp) / "0")
        if first is not None and first.get("commissioning_scripts"):
            failed = run_all(maas, first["commissioning_scripts"], Path(tmp) / "0")
            if failed:
                maas.signal("FAILED", f"{failed} commissioning scripts failed to run")
                return 0
            first = maas.scripts(Path(tmp) / "1")  # what is left after commissioning: the testing scripts
            where = Path(tmp) / "1"
        else:
            where = Path(tmp) / "0"
        if first is not None and first.get("testing_scripts"):
            maas.signal("TESTING")
            failed = run_all(maas, first["testing_scripts"], where)
            if failed:
                maas.signal("FAILED", f"{failed} test scripts failed to run")
                return 0
    maas.signal("OK", "All scripts successfully ran")
    return 0


if __name__ == "__main__":
    sys.exit(main())
