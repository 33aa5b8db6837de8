#!/usr/bin/env bash
# Builds the GPU bundle (tools/device/bundle.sh) and packs it into .xfer/carry.tar.xz, small
# enough to travel to a GPU machine; the scripts in tools/device/runs/ unpack it there and run.
set -euo pipefail
cd "$(dirname "$0")/../.."
tools/device/bundle.sh
mkdir -p .xfer
tar cf - .carry | xz -T0 -6 > .xfer/carry.tar.xz
du -h .xfer/carry.tar.xz
