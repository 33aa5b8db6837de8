#!/usr/bin/env bash
# Makes the image's base as a root file system tarball with mmdebstrap, from Debian's apt
# registry (or a mirror of it): Debian 12 minbase plus the runtime packages the Containerfile
# lists, so that building the image from it (build.sh --base TARBALL) needs no network at all.
#   deploy/container/base.sh OUT.tar [MIRROR]     (MIRROR: default the host's apt sources)
# Needs mmdebstrap (Debian package) and root, or user namespaces for its unshare mode. About
# 160 MB and 1.5 minutes; docs, man pages and translations are left out, as in debian:12-slim.
set -euo pipefail
out="${1:?usage: base.sh OUT.tar [MIRROR]}"
shift
# mmdebstrap picks its output format by the name: a directory for anything but a tarball's.
case "$out" in
  *.tar | *.tar.gz | *.tar.xz | *.tar.zst) ;;
  *) echo "base: $out: name a tarball (.tar, .tar.gz, .tar.xz or .tar.zst)" >&2; exit 2 ;;
esac
here="$(dirname "$0")"
command -v mmdebstrap >/dev/null ||
  { echo "base: needs mmdebstrap (apt-get install mmdebstrap)" >&2; exit 1; }
packages=$(sed -n '/# packages-begin/,/# packages-end/p' "$here/Containerfile" |
           sed -n 's/^[[:space:]]\+\([a-z0-9][a-z0-9.+-]*\) \\$/\1/p' | paste -sd, -)
[ -n "$packages" ] || { echo "base: no package list in $here/Containerfile" >&2; exit 1; }
mmdebstrap --variant=minbase --include="$packages" \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
  bookworm "$out" "$@"
echo "base: $out ($(du -h "$out" | cut -f1)): Debian 12 with $packages"
