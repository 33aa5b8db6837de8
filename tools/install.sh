#!/usr/bin/env bash
# Installs the built binaries and the systemd unit (run after `bazel build //daemon:gpuprofd
# //client:gpuprof`). Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
install -D -m 0755 bazel-bin/daemon/gpuprofd /usr/local/bin/gpuprofd
install -D -m 0755 bazel-bin/client/gpuprof /usr/local/bin/gpuprof
install -D -m 0755 bazel-bin/worker/gpuprof_worker /usr/local/lib/gpuprof/gpuprof_worker
install -D -m 0644 deploy/systemd/gpuprofd.service /etc/systemd/system/gpuprofd.service
install -D -m 0644 README.md /usr/local/share/doc/gpuprof/README.md
systemctl daemon-reload
echo "installed; start with: systemctl enable --now gpuprofd"
