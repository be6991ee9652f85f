"""Where a named CA bundle is on disk (environments/ca_paths.py)."""

from __future__ import annotations

from environments.ca_paths import REPO_ROOT, resolve_ca


def test_relative_names_are_relative_to_the_repository() -> None:
    assert resolve_ca("environments/ca/x.pem") == str(REPO_ROOT / "environments/ca/x.pem")
    assert resolve_ca("/etc/ssl/x.pem") == "/etc/ssl/x.pem" and resolve_ca(None) is None
    assert (REPO_ROOT / "Pulumi.yaml").is_file()
