#!/usr/bin/env bash
# Builds gpuprof and collects what a GPU machine without Bazel needs into .carry/ (git-ignored):
#   .carry/bin/      gpuprofd, gpuprof_worker, gpuprof, the sweep throughput benchmark and every
#                    test/benchmark binary tagged gpu
#   .carry/lib/      the gRPC/protobuf/abseil/prometheus shared libraries they link (not CUDA's:
#                    the GPU machine has its own driver, cudart, CUPTI, NVRTC and NCCL)
#   .carry/runfiles  data files tests read through TEST_SRCDIR
# Then tools/device/run_gpu_suite.sh runs there with LD_LIBRARY_PATH=.carry/lib:/usr/local/cuda/lib64.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.carry
rm -rf "$out/bin" "$out/lib" "$out/runfiles"
mkdir -p "$out/bin" "$out/lib" "$out/runfiles"

main_targets=(//daemon:gpuprofd //worker:gpuprof_worker //client:gpuprof
              //bench:sweep_throughput_benchmark)
# BUNDLE_GPU_TESTS=0: the daemon, worker and CLI only (a quick end-to-end check).
gpu_targets=""
if [ "${BUNDLE_GPU_TESTS:-1}" != 0 ]; then
  gpu_targets=$(bazel query 'attr(tags, "\bgpu\b", kind(".*_(test|binary)", //...))' 2>/dev/null || true)
fi
bazel build "${main_targets[@]}" $gpu_targets

for target in "${main_targets[@]}" $gpu_targets; do
  path="bazel-bin/$(echo "${target#//}" | tr ':' '/')"
  [ -f "$path" ] || continue
  cp -f "$path" "$out/bin/"
  # Data a test reads from its runfiles (e.g. kernel sources for NVRTC).
  if [ -d "$path.runfiles/gpuprof" ]; then cp -rL "$path.runfiles/gpuprof/." "$out/runfiles/" 2>/dev/null || true; fi
done
chmod -R u+w "$out"
# Debug info is not needed there and the bundle must stay small enough to travel.
strip --strip-debug "$out"/bin/* 2>/dev/null || true
# Runfiles repeat the binaries and their libraries; only the data files are needed.
find "$out/runfiles" -type f -exec sh -c 'head -c4 "$1" | grep -q ELF && rm -f "$1"' _ {} \;
find "$out/runfiles" -type l -delete
find "$out/runfiles" -type d -empty -delete 2>/dev/null || true
mkdir -p "$out/runfiles"

# Shared libraries the binaries need that a stock GPU machine lacks.
skip='linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread|librt\.so|libgcc_s|libstdc\+\+|libcuda\.so|libcudart|libcupti|libnvrtc|libnccl|libnvidia|libnvperf'
for binary in "$out"/bin/*; do
  ldd "$binary" 2>/dev/null | awk '/=> \//{print $3}' | grep -Ev "$skip" || true
done | sort -u | while read -r lib; do cp -fL "$lib" "$out/lib/"; done
du -sh "$out" | awk '{print "bundle: " $1 " in '"$out"'"}'
ls "$out/bin"
