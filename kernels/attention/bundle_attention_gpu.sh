#!/usr/bin/env bash
# Builds the attention GPU test and benchmark and collects what a GPU machine without Bazel
# needs to run them with run_attention_gpu.sh: the two binaries, the non-CUDA shared libraries
# they load (Debian's abseil; never CUDA or NCCL, which the GPU machine has), the PyTorch peer
# script and the runner.
#   kernels/attention/bundle_attention_gpu.sh DEST
#   (on the GPU machine) DEST/run_attention_gpu.sh DEST [tests|bench|sanitize|all]
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=${1:?destination folder}
bazel build //kernels/attention:attention_gpu_test //kernels/attention:attention_benchmark
rm -rf "$dest"
mkdir -p "$dest/bin" "$dest/lib"
binaries=(bazel-bin/kernels/attention/attention_gpu_test bazel-bin/kernels/attention/attention_benchmark)
cp "${binaries[@]}" "$dest/bin/"
ldd "${binaries[@]}" | awk '/libabsl|libgtest|libgmock/ {print $3}' | sort -u |
  while read -r lib; do cp -L "$lib" "$dest/lib/"; done
cp kernels/attention/torch_attention_peers.py kernels/attention/run_attention_gpu.sh "$dest/"
du -sh "$dest"
