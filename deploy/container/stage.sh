#!/usr/bin/env bash
# Stages the image's build context: the three binaries (debug info stripped) under bin/ and the
# CUDA libraries they load under cuda/, cuDNN's among them when the build host has cuDNN 9.
#   deploy/container/stage.sh DIR
# BIN_DIR (default bazel-bin) is where `bazel build //daemon:gpuprofd //worker:gpuprof_worker
# //client:gpuprof` put them (daemon/gpuprofd, worker/gpuprof_worker, client/gpuprof), or a
# directory holding the three side by side (tools/device/bundle.sh's .carry/bin); CUDA_PATH
# (default /usr/local/cuda) the toolkit they were built with. CUDNN=no leaves cuDNN out.
set -euo pipefail
context="${1:?usage: stage.sh DIR}"
bin_dir="${BIN_DIR:-bazel-bin}"
cuda="${CUDA_PATH:-/usr/local/cuda}"
mkdir -p "$context/bin" "$context/cuda"
binaries=()
for path in daemon/gpuprofd worker/gpuprof_worker client/gpuprof; do
  if [ -f "$bin_dir/$path" ]; then
    binaries+=("$bin_dir/$path")
  elif [ -f "$bin_dir/$(basename "$path")" ]; then
    binaries+=("$bin_dir/$(basename "$path")")
  else
    echo "stage: no $path or $(basename "$path") in $bin_dir" >&2
    exit 1
  fi
done
install -m 0755 "${binaries[@]}" "$context/bin/"
strip --strip-debug "$context"/bin/*

# Linked CUDA libraries, wherever the loader finds them in the toolkit.
for binary in "$context"/bin/*; do
  ldd "$binary" | awk -v cuda="$(readlink -f "$cuda")" '
    /=> \// { if (index($3, "/usr/local/cuda") == 1 || index($3, cuda) == 1) print $3 }'
done | sort -u | while read -r library; do
  cp -L "$library" "$context/cuda/$(basename "$library")"
done
# Loaded at run time, not linked: NVRTC itself (common/nvrtc_on_demand.cc), its builtins and
# the nvperf libraries CUPTI's metrics use.
for pattern in 'libnvrtc.so.[0-9]*' 'libnvrtc-builtins.so.*' 'libnvperf_host.so' 'libnvperf_target.so'; do
  found=$( (find -L "$cuda/lib64" "$cuda/lib" "$cuda/extras/CUPTI/lib64" -maxdepth 1 \
              -name "$pattern" ! -name '*.alt.*' 2>/dev/null || true) | sort | head -n 1)
  if [ -z "$found" ]; then
    echo "stage: $pattern not found under $cuda" >&2
    exit 1
  fi
  cp -L "$found" "$context/cuda/$(basename "$found")"
done
# cuDNN 9 for `--backend cudnn`: the worker dlopens libcudnn.so.9, which loads its sub-libraries
# (graph, engines, heuristics, ops...) the same way. Hard links where the context shares the
# toolkit's file system: these are about 500 MB.
if [ "${CUDNN:-auto}" != no ]; then
  cudnn=$( (find -L "$cuda/lib64" "$cuda/lib" /usr/lib/x86_64-linux-gnu -maxdepth 1 \
              -name 'libcudnn.so.9' 2>/dev/null || true) | head -n 1)
  if [ -n "$cudnn" ]; then
    for library in "$(dirname "$cudnn")"/libcudnn*.so.9; do
      target="$context/cuda/$(basename "$library")"
      cp -L --link "$library" "$target" 2>/dev/null || cp -L "$library" "$target"
    done
  else
    echo "stage: no cuDNN 9 (libcudnn.so.9) under $cuda or /usr/lib: the image cannot run" \
         "--backend cudnn" >&2
  fi
fi
du -sh "$context" | awk '{print "stage: " $1 " in " $2}'
