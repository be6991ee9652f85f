#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian 12 machine with Python 3.11:
# Debian packages (as root, only those missing), the project venv, and the project
# installed into it. Re-running is cheap: each step is skipped when its inputs are unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
mkdir -p .stamps

# Debian packages: only when root and something is missing (non-root machines skip, and the
# tiers that need them say so loudly when they run).
want=$(grep -v '^\s*#' tools/apt-packages.txt | awk 'NF{print $1}')
missing=()
for p in $want; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null || true
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "setup: NOT installing Debian packages (need root + apt-get): ${missing[*]}" >&2
  fi
fi

# Python venv + project (editable, with test extras).
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# The stamp lives in the venv: a venv made again (or by hand) installs the packages again.
stamp=.venv/.gpuaas-pip-$(sha256sum pyproject.toml | cut -c1-16)
if [ ! -f "$stamp" ]; then
  .venv/bin/pip install -q --disable-pip-version-check -e '.[test]' 2> >(grep -v '^WARNING: Location' >&2)
  rm -f .venv/.gpuaas-pip-*; touch "$stamp"
fi

# Every process of this venv (program, provider plugin, simulators, tests, ansible) serialises ast.parse
# on CPython versions with gh-106905 before any thread starts (clients/threadsafe_ast.py): a .pth line
# runs it at interpreter start, loaded by path so it never shadows the checkout's `clients` package.
tools/install-ast-guard.sh .venv

# The checkout's modules byte-compiled once: where PYTHONDONTWRITEBYTECODE is set (this machine's image sets it), no
# import writes a .pyc, and every process of a run (the program's runner, each provider plugin) compiled the project's
# modules again, ~0.3 s of CPU each on the 2-core machine. compileall skips what is up to date; an edited module is
# compiled again by the import that finds its .pyc stale (or by the next set-up).
.venv/bin/python -m compileall -q -j 0 __main__.py environments providers components clients simulators \
  preview_note ci_lint lab cli tools policy benchmarks tests >/dev/null

# The pinned Pulumi CLI (built from Go modules unless a new-enough one is on PATH): tools/pulumi-cli/.
tools/pulumi-cli/setup.sh
