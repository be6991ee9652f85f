"""The HTTP stacks load when a call first needs them, not when the program or a provider module is imported
(issue 29).

Every `pulumi` run starts the program (it imports every component and provider module) and a provider
plugin (it imports the provider modules of the resources it is asked about). The program never talks to
MAAS, the platform, the store or Vault; in a preview the plugin runs only checks and diffs, and no kind's check
or diff calls the platform (the RoCE assignment's check reads MAAS; the platform is called from create, update,
read and delete only). Importing python-libmaas (aiohttp,
macaroonbakery, requests) and httpx costs ~0.3 s of CPU per process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# What the program imports (__main__.py) and every provider module a plugin may unpickle a provider from.
IMPORTED = ["components.stack", "components.host_roles", "components.settings", "environments",
            *sorted(f"providers.{p.stem}" for p in (REPO / "providers").glob("*.py") if p.stem != "__init__")]
LOADED_ON_USE = ("maas.client", "aiohttp", "macaroonbakery", "requests", "httpx", "hvac", "boto3", "ansible_runner",
                 "clients.maas.client", "clients.maas.site", "clients.platform.client", "clients.platform.transport")


def _loaded_after(modules: list[str], probe: str = "") -> list[str]:
    code = (f"import importlib, json, sys\nfor m in {modules!r}: importlib.import_module(m)\n{probe}\n"
            # a None entry is an import blocked on purpose (clients/__init__.py: httpx's CLI), not a loaded module
            f"print(json.dumps(sorted(m for m, mod in sys.modules.items() if mod is not None and "
            f"(m.split('.')[0] in {LOADED_ON_USE!r} or m in {LOADED_ON_USE!r}))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                         check=True)
    return list(json.loads(out.stdout))


def test_importing_the_program_and_the_providers_loads_no_http_client() -> None:
    assert _loaded_after(IMPORTED) == []


def test_the_clients_load_on_first_use() -> None:
    """The check above can fail: asking the packages for the clients loads them."""
    loaded = _loaded_after(IMPORTED, "import clients.maas, clients.platform\n"
                                     "clients.maas.MaasSiteClient, clients.platform.PlatformClient")
    assert {"maas.client", "aiohttp", "httpx", "clients.maas.site", "clients.platform.client"} <= set(loaded)



def test_httpx_loads_without_its_command_line_client() -> None:
    """httpx imports its CLI (click, rich, pygments) whenever they are installed, and the test tools install them
    here; the clients package blocks that import (50-90 ms a process, clients/__init__.py)."""
    assert "httpx._main" in _loaded_after(["httpx"])  # without the block: loaded (so the next check can fail)
    loaded = _loaded_after(["clients", "httpx"])
    assert "httpx" in loaded and "httpx._main" not in loaded
