#!/usr/bin/env bash
# Builds the gpuprofd image.
#   deploy/container/build.sh [--base TARBALL|IMAGE] [--from-binaries DIR] [--no-cudnn] [TAG]
# TAG: default localhost/gpuprof/gpuprofd:<VERSION>.
# --base: the image to build on, instead of debian:12-slim from a registry: a root file system
#   tarball (base.sh makes one with mmdebstrap; imported as localhost/gpuprof/base:<its hash>)
#   or the name of a local image. A base that holds the runtime packages makes the build offline.
# --from-binaries DIR: gpuprofd, gpuprof_worker and gpuprof already built (DIR laid out like
#   bazel-bin, or the three side by side), instead of running Bazel.
# --no-cudnn: leave cuDNN out even where the build host has it (about 500 MB).
# CONTAINER_ENGINE picks podman or docker (default: podman, else a docker whose daemon answers).
# podman builds with chroot isolation, which needs no cgroups and no OCI runtime, so it also
# works inside a container or a VM whose cgroups podman cannot use.
set -euo pipefail
cd "$(dirname "$0")/../.."
base=""
bin_dir=""
cudnn=auto
while [ $# -gt 0 ]; do
  case "$1" in
    --base) base="${2:?--base needs a tarball or an image}"; shift 2 ;;
    --from-binaries) bin_dir="${2:?--from-binaries needs a directory}"; shift 2 ;;
    --no-cudnn) cudnn=no; shift ;;
    -*) echo "build: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
tag="${1:-localhost/gpuprof/gpuprofd:$(cat VERSION)}"

engine="${CONTAINER_ENGINE:-}"
if [ -z "$engine" ]; then
  if command -v podman >/dev/null; then
    engine=podman
  elif command -v docker >/dev/null && docker info >/dev/null 2>&1; then
    engine=docker
  else
    echo "build: no podman, nor a docker with a running daemon (apt-get install podman)" >&2
    exit 1
  fi
fi

build_args=()
if [ -n "$base" ]; then
  if [ -f "$base" ]; then
    image="localhost/gpuprof/base:$(sha256sum "$base" | cut -c1-12)"
    if ! "$engine" image inspect "$image" >/dev/null 2>&1; then
      "$engine" import "$base" "$image" >/dev/null
    fi
    echo "build: base $base imported as $image"
    base="$image"
  fi
  build_args+=(--build-arg "BASE=$base")
  # Never reach for a registry: the base must be here.
  if [ "$(basename "$engine")" = podman ]; then build_args+=(--pull=never); fi
fi
if [ "$(basename "$engine")" = podman ]; then
  build_args+=(--isolation="${BUILDAH_ISOLATION:-chroot}")
fi

if [ -z "$bin_dir" ]; then
  bazel build //daemon:gpuprofd //worker:gpuprof_worker //client:gpuprof
  bin_dir=bazel-bin
fi
context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
BIN_DIR="$bin_dir" CUDNN="$cudnn" deploy/container/stage.sh "$context"
"$engine" build "${build_args[@]}" -f deploy/container/Containerfile -t "$tag" "$context"
echo "built $tag"
