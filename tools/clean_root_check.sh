#!/usr/bin/env bash
# Checks the README's promise on a fresh Debian 12: makes a minimal bookworm root with
# mmdebstrap (from Debian's apt registry), gives it this host's CUDA toolkit (read-only), clones
# this repository's HEAD into it, and runs `tools/setup.sh` then `tools/test.sh` there as root,
# with nothing from this machine's own installs (no Bazel cache, no kubectl, no Python stubs).
#   tools/clean_root_check.sh [ROOT_DIR] [STAGES]
#     ROOT_DIR  where the root is made (default /var/tmp/gpuprof-clean-root; removed first,
#               unless KEEP_ROOT=1: then a root made before is reused, its clone moved to this
#               HEAD, and setup and Bazel's cache there are taken as they are)
#     STAGES    GPUPROF_CI_STAGES for tools/test.sh (default "plain"; CI's are
#               "shipped image fuzz asan tsan", and image needs podman, which a chroot lacks)
# Needs root, mmdebstrap and a CUDA toolkit at $CUDA_PATH (default /usr/local/cuda).
set -euo pipefail
root="${1:-/var/tmp/gpuprof-clean-root}"
stages="${2:-plain}"
repo="$(cd "$(dirname "$0")/.." && pwd)"
cuda="$(readlink -f "${CUDA_PATH:-/usr/local/cuda}")"
[ "$(id -u)" -eq 0 ] || { echo "clean_root_check: needs root" >&2; exit 2; }
command -v mmdebstrap >/dev/null || { echo "clean_root_check: needs mmdebstrap" >&2; exit 2; }
[ -x "$cuda/bin/nvcc" ] || { echo "clean_root_check: no CUDA toolkit at $cuda" >&2; exit 2; }

mounted=()
cleanup() {
  # Bazel's server outlives the command; it holds the root's mounts.
  [ -d "$root/src/gpuprof" ] && chroot "$root" /bin/sh -c 'cd /src/gpuprof && bazel shutdown' \
    >/dev/null 2>&1 || true
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM
bind() {  # bind SOURCE TARGET [ro]
  mkdir -p "$2"
  mount --bind "$1" "$2"
  mounted+=("$2")
  [ "${3:-}" = ro ] && mount -o remount,bind,ro "$2"
  return 0
}

start=$SECONDS
reuse=0
[ "${KEEP_ROOT:-0}" = 1 ] && [ -d "$root/src/gpuprof/.git" ] && reuse=1
if [ "$reuse" = 0 ]; then
  rm -rf "$root"
  mmdebstrap --variant=minbase --include=git,ca-certificates,sudo bookworm "$root"
  echo "clean_root_check: root made in $((SECONDS - start))s"
fi
# The root a mount point of its own: tests that unshare the mount namespace make "/" private,
# which only a mount point can be.
mount --bind "$root" "$root"
mounted+=("$root")
cp /etc/resolv.conf "$root/etc/resolv.conf"
# An installed Debian names localhost in /etc/hosts (the installer writes it; mmdebstrap does
# not), and the TLS tests connect to localhost.
[ -s "$root/etc/hosts" ] || printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' \
  > "$root/etc/hosts"
# The host's own certificate authorities (a site's TLS-inspecting proxy, say): without them the
# root could not reach the registries the host reaches. Debian's own bundle is already there.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  chroot "$root" update-ca-certificates >/dev/null
fi
bind /proc "$root/proc"
bind /sys "$root/sys"
bind /dev "$root/dev"
bind /dev/pts "$root/dev/pts"
mkdir -p "$root/dev/shm" && mount -t tmpfs tmpfs "$root/dev/shm" && mounted+=("$root/dev/shm")
bind "$cuda" "$root$cuda" ro
ln -sfn "$cuda" "$root/usr/local/cuda"
# As the toolkit's installer leaves it: its libraries known to the dynamic loader (NVRTC opens
# libnvrtc-builtins by name).
if compgen -G "/etc/ld.so.conf.d/*cuda*.conf" >/dev/null; then
  cp /etc/ld.so.conf.d/*cuda*.conf "$root/etc/ld.so.conf.d/"
  chroot "$root" ldconfig
fi
if [ "$reuse" = 1 ]; then
  git -C "$root/src/gpuprof" fetch --quiet "$repo" HEAD
  git -C "$root/src/gpuprof" reset --quiet --hard FETCH_HEAD
else
  git clone --quiet "$repo" "$root/src/gpuprof"
fi
echo "clean_root_check: HEAD $(git -C "$root/src/gpuprof" rev-parse --short HEAD), stages: $stages"
chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  LANG=C.UTF-8 NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt GPUPROF_CI_STAGES="$stages" FUZZ_SECONDS="${FUZZ_SECONDS:-60}" \
  FUZZ_SEED="${FUZZ_SEED:-1}" FUZZ_RUNS="${FUZZ_RUNS:-100000}" \
  /bin/bash -c 'cd /src/gpuprof && tools/test.sh'
echo "clean_root_check: passed in $((SECONDS - start))s"
