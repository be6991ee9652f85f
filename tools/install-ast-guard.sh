#!/usr/bin/env bash
# Install the gh-106905 guard (clients/threadsafe_ast.py) into a virtualenv as a .pth line, so it runs at
# the start of every Python process of that venv, before any thread: tools/install-ast-guard.sh <venv>
set -euo pipefail
venv="$1"
repo="$(cd "$(dirname "$0")/.." && pwd)"
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
line="import importlib.util as _u; _s = _u.spec_from_file_location('gpuaas_threadsafe_ast', '$repo/clients/threadsafe_ast.py'); _m = _u.module_from_spec(_s); _s.loader.exec_module(_m); _m.install()"
pth="$site/gpuaas-threadsafe-ast.pth"
[[ -f "$pth" && "$(cat "$pth")" == "$line" ]] || printf '%s\n' "$line" > "$pth"
