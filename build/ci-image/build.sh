#!/usr/bin/env bash
# Build and publish the CI base image, then print its digest (the only way the pipeline names it).
#   build/ci-image/build.sh                 build, push, print  <registry>/ci-image@sha256:...
#   build/ci-image/build.sh --pin DIGEST    write that digest into .gitlab-ci.yml (GPUAAS_CI_IMAGE)
# Needs CI_REGISTRY_IMAGE (GitLab sets it) and docker; reads the pinned inputs from pins.env.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

if [[ "${1:-}" == "--pin" ]]; then
  digest="${2:?usage: build.sh --pin sha256:<64 hex>}"
  [[ "$digest" =~ ^sha256:[0-9a-f]{64}$ ]] || { echo "error: not a digest: $digest" >&2; exit 2; }
  sed -i -E "s#(GPUAAS_CI_IMAGE: \\\$CI_REGISTRY_IMAGE/ci-image)@sha256:[0-9a-f]{64}#\\1@${digest}#" "$repo/.gitlab-ci.yml"
  grep -q "ci-image@${digest}" "$repo/.gitlab-ci.yml" || { echo "error: GPUAAS_CI_IMAGE not found" >&2; exit 1; }
  echo "pinned ci-image@${digest} in .gitlab-ci.yml"
  exit 0
fi

: "${CI_REGISTRY_IMAGE:?set CI_REGISTRY_IMAGE (the registry path GitLab gives the project) to publish the image}"
command -v docker >/dev/null || { echo "error: docker is needed to build the image" >&2; exit 1; }
# shellcheck source=/dev/null
source "$here/pins.env"
for pin in BASE_DIGEST PULUMI_SHA256; do
  [[ -n "${!pin}" ]] || { echo "error: $pin is empty in build/ci-image/pins.env: pin it first" >&2; exit 1; }
done
tag="$CI_REGISTRY_IMAGE/ci-image:build-$(git -C "$repo" rev-parse --short HEAD)"
docker build -f "$here/Dockerfile" -t "$tag" \
  --build-arg BASE_IMAGE="$BASE_IMAGE" --build-arg BASE_DIGEST="$BASE_DIGEST" \
  --build-arg PULUMI_VERSION="$PULUMI_VERSION" --build-arg PULUMI_SHA256="$PULUMI_SHA256" "$repo"
docker push "$tag" >/dev/null
ref="$(docker inspect --format '{{index .RepoDigests 0}}' "$tag")"
[[ "$ref" == *@sha256:* ]] || { echo "error: no registry digest for $tag" >&2; exit 1; }
echo "$ref"
echo "pin it: build/ci-image/build.sh --pin ${ref##*@}" >&2
