#!/usr/bin/env bash
# Provide the pinned Pulumi CLI in build/pulumi/bin (gitignored), where tests, the demo, the
# benchmarks and the pipeline's runners find it (tools/pulumi_cli.py). Called by tools/setup.sh.
#
#   1. already provided for this pin (stamp matches): nothing to do (a second run takes milliseconds);
#   2. a `pulumi` on PATH at least as new as the pin: link it (its own bundled plugins come with it);
#   3. else build the pin from Go modules: this directory's go.mod requires pulumi's pkg and sdk at one
#      version; the Go module and build caches stay where `go env GOMODCACHE GOCACHE` says (outside
#      the checkout), so a rebuild after a clean clone reuses them.
# The Python language host (module .../sdk/python/cmd/pulumi-language-python/v3) is not served by the
# module proxy here, so programs run as Automation API inline programs (no language host needed);
# dynamic providers run through the SDK's `pulumi-resource-pulumi-python` plugin, installed from the
# module cache (the policy pack runs as a binary analyzer: policy/run-policy-pack).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="$repo/build/pulumi"
bin="$out/bin"
version="$(awk '$1 == "github.com/pulumi/pulumi/pkg/v3" {print $2}' "$here/go.mod")"
[[ -n "$version" ]] || { echo "setup: no github.com/pulumi/pulumi/pkg/v3 require in $here/go.mod" >&2; exit 2; }
want="${version#v}"
stamp="$out/.provided-$(cat "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-16)"

if [[ -f "$stamp" && -x "$bin/pulumi" ]] && "$bin/pulumi" version >/dev/null 2>&1; then
  exit 0
fi

# version_ge A B: A >= B for dotted versions
version_ge() { [[ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -1)" == "$2" ]]; }

mkdir -p "$bin"
rm -f "$out"/.provided-* "$bin/pulumi-analyzer-policy-python"

on_path="$(PATH="$(printf '%s' "$PATH" | tr ':' '\n' | grep -vxF "$bin" | paste -sd:)" command -v pulumi || true)"
if [[ -n "$on_path" ]]; then
  have="$("$on_path" version 2>/dev/null | sed 's/^v//')"
  if [[ -n "$have" ]] && version_ge "$have" "$want"; then
    echo "setup: using the Pulumi CLI on PATH: $on_path (v$have >= v$want)"
    ln -sfn "$on_path" "$bin/pulumi"
    rm -f "$bin/pulumi-resource-pulumi-python"  # the release bundles its own, next to its binary
    touch "$stamp"
    exit 0
  fi
  echo "setup: the Pulumi CLI on PATH ($on_path, v${have:-unknown}) is older than v$want: building v$want"
fi

if ! command -v go >/dev/null; then
  cat >&2 <<EOF
setup: the Pulumi CLI v$want (or newer) is needed and neither it nor Go is installed.
  Install the CLI:  curl -fsSL https://get.pulumi.com | sh -s -- --version $want   (then put ~/.pulumi/bin on PATH)
  or install Go >= 1.26 (https://go.dev/dl/) and run make again: set-up builds the CLI from Go modules.
EOF
  exit 1
fi

cd "$here"
started=$SECONDS
echo "setup: building the Pulumi CLI $version from Go modules into build/pulumi/bin"
echo "setup:   (first build ~4 min and ~3.5 GB of Go caches on 2 cores; module cache $(go env GOMODCACHE), build cache $(go env GOCACHE))"
echo "setup:   downloading modules..."
go mod download
echo "setup:   compiling (a line per 200 packages)..."
rm -f "$bin/pulumi.new"
go build -v -trimpath -o "$bin/pulumi.new" \
  -ldflags "-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$version" \
  github.com/pulumi/pulumi/pkg/v3/cmd/pulumi 2>&1 \
  | awk '/^(#|go: |[^ ]+\.go:)/ {print; fflush(); next} {n++} n % 200 == 0 {printf "setup:     %d packages\n", n; fflush()}'
[[ "${PIPESTATUS[0]}" == 0 && -x "$bin/pulumi.new" ]] || { echo "setup: building the Pulumi CLI failed" >&2; exit 1; }
mv -f "$bin/pulumi.new" "$bin/pulumi"

# The dynamic-provider plugin is a plain file of the sdk module (absent from the PyPI wheel).
sdk_dir="$(go list -m -f '{{.Dir}}' github.com/pulumi/pulumi/sdk/v3)"
install -m 0755 "$sdk_dir/python/dist/pulumi-resource-pulumi-python" "$bin/pulumi-resource-pulumi-python"

got="$("$bin/pulumi" version)"
[[ "$got" == "$version" ]] || { echo "setup: the built CLI says '$got', expected $version" >&2; exit 1; }
touch "$stamp"
echo "setup: Pulumi CLI $got ready in $((SECONDS - started)) s ($(du -sh "$bin/pulumi" | cut -f1))"
