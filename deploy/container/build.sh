#!/usr/bin/env bash
# Builds the gpuprofd image from Bazel's outputs.
#   deploy/container/build.sh [TAG]     (default localhost/gpuprof/gpuprofd:<VERSION>)
# CONTAINER_ENGINE picks podman or docker (default: whichever is installed, podman first).
set -euo pipefail
cd "$(dirname "$0")/../.."
tag="${1:-localhost/gpuprof/gpuprofd:$(cat VERSION)}"
engine="${CONTAINER_ENGINE:-$(command -v podman || command -v docker || true)}"
if [ -z "$engine" ]; then
  echo "build: no podman or docker; set CONTAINER_ENGINE" >&2
  exit 1
fi
bazel build //daemon:gpuprofd //worker:gpuprof_worker //client:gpuprof
context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
deploy/container/stage.sh "$context"
"$engine" build -f deploy/container/Containerfile -t "$tag" "$context"
echo "built $tag"
