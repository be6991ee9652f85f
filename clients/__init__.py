"""Clients of the systems the providers drive: the leaves of the import graph."""

import sys
from typing import Any, cast

# httpx imports its command-line client (click, rich, pygments: 50-90 ms a process) whenever those packages are
# installed, and the test tools install them in this venv. No process of this project runs httpx's command
# line; a None in sys.modules makes that import fail as httpx expects when its `cli` extra is absent (issue 29).
cast(dict[str, Any], sys.modules).setdefault("httpx._main", None)
