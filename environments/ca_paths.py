"""Where a named CA bundle is on disk: `resolve_ca`, the one place a bundle's name becomes a file, for validation
(`rules_tls`) and the providers alike. A module of its own so a provider plugin does not load the environment
model or cryptography to find a file (issue 29)."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def resolve_ca(path: str | None, root: Path = REPO_ROOT) -> str | None:
    """A named CA bundle as an absolute file path (relative names are relative to the repository root,
    the directory Pulumi runs the program and the providers in)."""
    if not path:
        return None
    p = Path(path)
    return str(p if p.is_absolute() else root / p)
