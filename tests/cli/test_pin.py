"""`gpuaas-infra pin` and doctor's `pin` rows (issue 28, item 3): host artifacts are operator data.

A downloaded file (or the URL the hosts fetch) becomes `{url, sha256}` in the environment's pins file, its
comments kept; doctor fetches every pin of a stack from a real HTTP server and says which match, which the
mirror serves differently, which are gone and which are not pinned yet (with the command that pins them).
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.doctor_pins import check_pins
from cli.main import main
from cli.pin import Digest, digest_url
from clients.tls import CaBundleError
from components.settings import StackSettings
from environments import load_environment
from environments.pins import load_pins

BODY = b"#!/bin/sh\necho 'k3s v1.30.4+k3s1'\n" * 100


@pytest.fixture
def mirror(tmp_path: Path) -> Iterator[str]:
    """A plain HTTP server over tmp_path/www (the site's artifact mirror)."""
    www = tmp_path / "www"
    (www / "k3s").mkdir(parents=True)
    (www / "k3s" / "k3s").write_bytes(BODY)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (stdlib signature)
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(www)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _pins_file(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "staging.yaml"
    path.write_text("# staging: operator data\nartifacts:\n"
                    f'  k3s: {{url: "{url}/k3s/k3s", sha256: ""}}   # a comment that stays\n'
                    '  gitlab: {url: "https://mirror.invalid/gitlab-ce.deb", sha256: ""}\n')
    return path


def test_pin_a_downloaded_file_and_a_url_into_the_pins_file(tmp_path: Path, mirror: str,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    pins = _pins_file(tmp_path, mirror)
    local = tmp_path / "k3s"
    local.write_bytes(BODY)
    digest = hashlib.sha256(BODY).hexdigest()
    assert main(["pin", str(local), "--url", f"{mirror}/k3s/k3s", "--name", "k3s", "--pins", str(pins)]) == 0
    assert f'sha256: "{digest}"' in capsys.readouterr().out
    loaded, bad = load_pins(pins)
    assert bad == [] and loaded is not None
    assert loaded.artifacts["k3s"].sha256 == digest and not loaded.artifacts["gitlab"].pinned
    assert pins.read_text().startswith("# staging: operator data\n"), "the file's comments stay"
    # from the URL: what the hosts will fetch, streamed and hashed
    assert main(["pin", f"{mirror}/k3s/k3s", "--name", "pulumi_cli", "--version", "3.274.1",
                 "--pins", str(pins)]) == 0
    loaded, _ = load_pins(pins)
    assert loaded is not None and loaded.artifacts["pulumi_cli"].sha256 == digest
    assert loaded.artifacts["pulumi_cli"].version == "3.274.1"
    assert digest_url(f"{mirror}/k3s/k3s").size == len(BODY)
    # a local file without the URL the hosts fetch it from is refused before anything is written
    with pytest.raises(SystemExit):
        main(["pin", str(local), "--name", "k3s", "--pins", str(pins)])
    assert main(["pin", f"{mirror}/k3s/missing", "--name", "k3s"]) == 1


def test_doctor_fetches_every_pin_and_compares_its_digest(tmp_path: Path, mirror: str) -> None:
    pins = _pins_file(tmp_path, mirror)
    main(["pin", f"{mirror}/k3s/k3s", "--name", "k3s", "--pins", str(pins)])
    text = pins.read_text()
    pins.write_text(text + f'  node_agent: {{url: "{mirror}/k3s/k3s", sha256: "{"0" * 64}"}}\n'
                    + f'  gitlab_runner: {{url: "{mirror}/gone.deb", sha256: "{"1" * 64}"}}\n')
    settings = StackSettings.from_config("staging", {"environment": "staging", "hostRoles": {"pins": str(pins)}})
    rows: list[tuple[str, str, str, str, str]] = []
    check_pins(load_environment("staging"), settings, lambda *row: rows.append(row))
    by_name = {r[1].split()[0]: r for r in rows}
    assert {r[0] for r in rows} == {"pin"}
    assert by_name["k3s"][2:4] == ("OK", f"sha256 matches ({len(BODY)} bytes)")
    assert by_name["node_agent"][2] == "FAIL" and "differs from the pin" in by_name["node_agent"][3]
    assert by_name["gitlab_runner"][2:4] == ("FAIL", "HTTP 404")
    assert by_name["gitlab"][2] == "FAIL" and by_name["gitlab"][4].startswith(
        "gpuaas-infra pin https://mirror.invalid/gitlab-ce.deb --name gitlab --pins ")


@pytest.mark.parametrize("kind", ["no PEM", "a directory", "missing"])
def test_a_ca_bundle_that_is_no_pem_is_one_fail_row_and_one_clear_error(tmp_path: Path, mirror: str, kind: str,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The mirror's CA bundle goes to httpx as an SSL context (a path string is deprecated there): a path that is
    not a PEM file of CA certificates (a file of something else, a directory, nothing) is the pin command's error
    and doctor's FAIL row, naming the file, not a crash."""
    bogus = tmp_path / "not-a-ca.pem"
    if kind == "no PEM":
        bogus.write_text("not a certificate\n")
    elif kind == "a directory":
        bogus.mkdir()
    with pytest.raises(CaBundleError, match="not-a-ca.pem"):
        digest_url(f"{mirror}/k3s/k3s", str(bogus))
    assert main(["pin", f"{mirror}/k3s/k3s", "--name", "k3s", "--ca-bundle", str(bogus)]) == 1
    assert "not-a-ca.pem" in capsys.readouterr().err
    pins = _pins_file(tmp_path, mirror)
    main(["pin", f"{mirror}/k3s/k3s", "--name", "k3s", "--pins", str(pins)])
    settings = StackSettings.from_config("staging", {"environment": "staging", "hostRoles": {"pins": str(pins)}})
    rows: list[tuple[str, str, str, str, str]] = []

    def fetch(url: str, ca: str | None) -> Digest:
        return digest_url(url, str(bogus))

    check_pins(load_environment("staging"), settings, lambda *row: rows.append(row), fetch=fetch)
    k3s = next(r for r in rows if r[1].startswith("k3s "))
    reason = {"no PEM": "SSLError", "a directory": "IsADirectoryError", "missing": "FileNotFoundError"}[kind]
    assert k3s[2:] == ("FAIL", f"CA bundle {bogus} unusable ({reason})",
                       "ca_bundles.s3: name a PEM file of CA certificates"), k3s
