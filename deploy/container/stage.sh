#!/usr/bin/env bash
# Stages the image's build context: the three binaries (debug info stripped) under bin/ and the
# CUDA libraries they load under cuda/.
#   deploy/container/stage.sh DIR
# BIN_DIR (default bazel-bin) is where `bazel build //daemon:gpuprofd //worker:gpuprof_worker
# //client:gpuprof` put them; CUDA_PATH (default /usr/local/cuda) the toolkit they were built with.
set -euo pipefail
context="${1:?usage: stage.sh DIR}"
bin_dir="${BIN_DIR:-bazel-bin}"
cuda="${CUDA_PATH:-/usr/local/cuda}"
mkdir -p "$context/bin" "$context/cuda"
install -m 0755 "$bin_dir/daemon/gpuprofd" "$bin_dir/worker/gpuprof_worker" \
  "$bin_dir/client/gpuprof" "$context/bin/"
strip --strip-debug "$context"/bin/*

# Linked CUDA libraries, wherever the loader finds them in the toolkit.
for binary in "$context"/bin/*; do
  ldd "$binary" | awk -v cuda="$(readlink -f "$cuda")" '
    /=> \// { if (index($3, "/usr/local/cuda") == 1 || index($3, cuda) == 1) print $3 }'
done | sort -u | while read -r library; do
  cp -L "$library" "$context/cuda/$(basename "$library")"
done
# Loaded at run time, not linked: NVRTC's builtins and the nvperf libraries CUPTI's metrics use.
for pattern in 'libnvrtc-builtins.so.*' 'libnvperf_host.so' 'libnvperf_target.so'; do
  found=$( (find -L "$cuda/lib64" "$cuda/lib" "$cuda/extras/CUPTI/lib64" -maxdepth 1 \
              -name "$pattern" ! -name '*.alt.*' 2>/dev/null || true) | sort | head -n 1)
  if [ -z "$found" ]; then
    echo "stage: $pattern not found under $cuda" >&2
    exit 1
  fi
  cp -L "$found" "$context/cuda/$(basename "$found")"
done
du -sh "$context" | awk '{print "stage: " $1 " in " $2}'
