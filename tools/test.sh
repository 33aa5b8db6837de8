#!/usr/bin/env bash
# Sets up a Debian 12 machine and runs every test that needs no GPU. This is what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
bazel test //... "$@"
