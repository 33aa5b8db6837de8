#!/usr/bin/env bash
# Installs everything gpuprof needs to build and test on Debian 12 (bookworm) that already has
# the CUDA toolkit in /usr/local/cuda. Safe to run again. Needs root (or sudo).
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

PACKAGES=(
  # Build: Bazel from Debian (works offline), the C++ toolchain, protoc with the gRPC plugin.
  bazel-bootstrap bazel-rules-java g++ pkg-config
  protobuf-compiler protobuf-compiler-grpc grpc-proto
  # Libraries, found through pkg-config by //tools/build:system_libs.bzl.
  libgrpc++-dev libprotobuf-dev libabsl-dev prometheus-cpp-dev libsqlite3-dev
  libgtest-dev libgmock-dev libbenchmark-dev libssl-dev zlib1g-dev
  # Tests: a real Prometheus server and promtool for the metrics tests.
  prometheus
  # Fuzzing: clang with libFuzzer and its sanitizer runtimes (tools/fuzzing/run_fuzzers.sh).
  # GCC's ASan/UBSan/TSan runtimes for --config=asan and --config=tsan come with g++.
  clang libclang-rt-dev
  # Tools used by scripts and tests; openssl makes the TLS tests' certificates, gnuplot draws
  # `gpuprof sweep plot` (and its test); iproute2 gives the fleet test its network namespaces.
  python3 sqlite3 curl ca-certificates openssl gnuplot-nox iproute2
  # The Python client (python/, tests/python): Debian's gRPC, protobuf and pandas for python3;
  # setuptools and venv for `pip install --no-build-isolation ./python`; mypy checks its types.
  python3-grpcio python3-protobuf python3-pandas python3-setuptools python3-venv python3-mypy
  # The Kubernetes manifests' check (deploy/k8s): Node.js, and npm for its packages (below).
  nodejs
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

# npm, unless the machine's Node.js brings its own (NodeSource's nodejs does; Debian's does not).
if ! command -v npm >/dev/null 2>&1; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends npm >/dev/null
fi
# The Kubernetes manifests' check, from the npm registry: the API schema packages (exact versions
# from deploy/k8s/check/package-lock.json) and kubectl with kustomize v5 (Debian 12's
# kubernetes-client is too old), installed once into /usr/local/lib/gpuprof-k8s-check.
$SUDO deploy/k8s/check/install.sh /usr/local/lib/gpuprof-k8s-check

# The Python client's gpuprof.v1 modules, generated from proto/ into python/gpuprof/v1 (ignored
# by git) so that PYTHONPATH=python imports it in place; Bazel's tests generate their own.
python/generate_stubs.sh python

cuda="${CUDA_PATH:-/usr/local/cuda}"
if [ ! -x "$cuda/bin/nvcc" ]; then
  echo "setup: no CUDA toolkit at $cuda (install it, or set CUDA_PATH)" >&2
  exit 1
fi
echo "setup: ok (bazel $(bazel --version 2>/dev/null | awk '{print $2}'), CUDA at $cuda)"
