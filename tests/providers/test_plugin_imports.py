"""A site stack's provider plugin loads what its checks and diffs use, not the environment's loader and model or
cryptography (issue 29: the plugin starts again at every pass, and its imports are on the pass's critical path).
Run in a fresh interpreter, as the plugin starts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SITE_KINDS = ("providers.site_profile", "providers.bootstrap_bundle", "providers.roce_assignment",
              "providers.machine_pool")
# python-libmaas loads at a provider's first MAAS call (clients/maas is lazy), not with the adapters
NOT_LOADED = ("environments.model", "environments.loader", "environments.rules", "cryptography", "maas.client")


def test_the_site_kinds_import_no_environment_model_loader_or_cryptography() -> None:
    code = (f"import json, sys\nfor m in {SITE_KINDS!r}: __import__(m)\n"
            "print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout))
    assert set(SITE_KINDS) <= loaded
    assert not sorted(m for m in loaded if any(m == n or m.startswith(n + ".") for n in NOT_LOADED))


def test_the_package_still_offers_loading_by_name() -> None:
    import environments

    assert callable(environments.load_environment) and environments.Environment.__name__ == "Environment"
