#!/usr/bin/env bash
# The image end to end on this machine, as `GPUPROF_CI_STAGES=image tools/test.sh` runs it:
# installs podman, runc and mmdebstrap from Debian when missing, makes the base with base.sh
# (kept in GPUPROF_IMAGE_CACHE, default /var/cache/gpuprof-image, and made again only when the
# Containerfile's package list changes), builds the image from it and the Bazel outputs, and
# runs smoke_test.sh on it. About 2.5 minutes the first time (the base), 40 s after; 1.2 GB of
# disk with cuDNN. Needs root (or sudo) for apt and mmdebstrap.
set -euo pipefail
cd "$(dirname "$0")/../.."
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for package in podman runc mmdebstrap; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "image check: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

cache="${GPUPROF_IMAGE_CACHE:-/var/cache/gpuprof-image}"
key=$(sed -n '/# packages-begin/,/# packages-end/p' deploy/container/Containerfile |
      sha256sum | cut -c1-12)
base="$cache/base-bookworm-$key.tar"
if [ ! -f "$base" ]; then
  $SUDO mkdir -p "$cache"
  $SUDO deploy/container/base.sh "$cache/partial-$key.tar"
  $SUDO mv "$cache/partial-$key.tar" "$base"
fi

bazel build //daemon:gpuprofd //worker:gpuprof_worker //client:gpuprof
tag="localhost/gpuprof/gpuprofd:check"
$SUDO deploy/container/build.sh --base "$base" --from-binaries bazel-bin "$tag"
$SUDO deploy/container/smoke_test.sh "$tag"
