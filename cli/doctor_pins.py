"""doctor's `pin` rows: every host artifact the stack pins is fetched from its URL and its sha256 compared
(environments/pins.py: the pins file of `gpuaas-infra:hostRoles.pins`, then the inline pins). Nothing is
kept: the download is streamed through the hash. A pin not filled yet is a FAIL with the command that fills it."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from clients.tls import CaBundleError
from components.settings import StackSettings
from environments import Environment
from environments.ca_paths import resolve_ca
from environments.model import EndpointKind
from environments.pins import Pin, load_pins

from .pin import Digest, digest_url

Add = Callable[[str, str, str, str, str], None]  # (check, target, status, detail, hint)


def stack_pins(settings: StackSettings) -> tuple[str, dict[str, Pin]]:
    """(the pins file as named, artifact -> pin) of the stack, inline pins replacing the file's."""
    roles = settings.host_roles
    if roles is None:
        return "", {}
    pins: dict[str, Pin] = {}
    if roles.pins:
        loaded, _ = load_pins(roles.pins)
        pins = dict(loaded.artifacts) if loaded else {}
    pins |= {k: Pin(url=a.url, sha256=a.sha256) for k, a in roles.artifacts.items()}
    return roles.pins or "", pins


def check_pins(env: Environment, settings: StackSettings, add: Add,
               fetch: Callable[[str, str | None], Digest] = digest_url) -> None:
    file, pins = stack_pins(settings)
    ca = resolve_ca(env.ca_bundles.s3)  # the mirror is the site's artifact store (WEKA S3)
    for name, pin in sorted(pins.items()):
        target = f"{name} {pin.url}"
        if not pin.pinned:
            version = f" --version {pin.version}" if pin.version else ""
            add("pin", target, "FAIL", "not pinned yet (no sha256)",
                f"gpuaas-infra pin {pin.url} --name {name}{version} --pins {file or '<pins file>'}")
            continue
        try:
            got = fetch(pin.url, ca)
        except httpx.HTTPStatusError as e:
            add("pin", target, "FAIL", f"HTTP {e.response.status_code}", "upload the artifact to the mirror, "
                "or fix the pin's url")
            continue
        except httpx.HTTPError as e:
            add("pin", target, "FAIL", f"unreachable ({type(e).__name__})",
                "check the mirror's URL, DNS and certificate (ca_bundles.s3)")
            continue
        except CaBundleError as e:
            add("pin", target, "FAIL", e.detail, e.hint(EndpointKind.S3.value))
            continue
        if got.sha256 != pin.sha256:
            add("pin", target, "FAIL", f"sha256 {got.sha256[:16]}… differs from the pin {pin.sha256[:16]}…",
                "the mirror serves another file: upload the pinned release again, or pin what it serves "
                f"after checking it (gpuaas-infra pin {pin.url} --name {name} --pins {file or '<pins file>'})")
            continue
        add("pin", target, "OK", f"sha256 matches ({got.size} bytes)", "")
