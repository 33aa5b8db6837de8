#!/usr/bin/env bash
# Installs everything gpuprof needs to build and test on Debian 12 (bookworm) that already has
# the CUDA toolkit in /usr/local/cuda. Safe to run again. Needs root (or sudo).
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

PACKAGES=(
  # Build: Bazel from Debian (works offline), the C++ toolchain, protoc with the gRPC plugin.
  bazel-bootstrap bazel-rules-java g++ pkg-config
  protobuf-compiler protobuf-compiler-grpc grpc-proto
  # Libraries, found through pkg-config by //tools/build:system_libs.bzl.
  libgrpc++-dev libprotobuf-dev libabsl-dev prometheus-cpp-dev libsqlite3-dev
  libgtest-dev libgmock-dev libbenchmark-dev libssl-dev
  # Tests: openssl makes the certificates of the TLS tests.
  openssl
  # Tests: a real Prometheus server and promtool for the metrics tests.
  prometheus
  # Tools used by scripts and tests.
  python3 sqlite3 curl ca-certificates
)

missing=()
for package in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

# The Debian prometheus package starts a system service; gpuprof's tests start their own.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
  $SUDO systemctl stop prometheus || true
fi

cuda="${CUDA_PATH:-/usr/local/cuda}"
if [ ! -x "$cuda/bin/nvcc" ]; then
  echo "setup: no CUDA toolkit at $cuda (install it, or set CUDA_PATH)" >&2
  exit 1
fi
echo "setup: ok (bazel $(bazel --version 2>/dev/null | awk '{print $2}'), CUDA at $cuda)"
