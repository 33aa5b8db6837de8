#!/usr/bin/env bash
# Runs a built image without a GPU: its entry point (tini, gpuprofd) starts the daemon, which
# reports no GPUs; `gpuprof gpus` inside answers from it; every library the binaries link
# resolves in the image (the driver's libcuda aside: the NVIDIA runtime mounts it); SIGTERM
# through tini stops the daemon cleanly (exit status 0).
#   deploy/container/smoke_test.sh [IMAGE]     (default localhost/gpuprof/gpuprofd:<VERSION>)
# CONTAINER_ENGINE as for build.sh. Where podman's default OCI runtime cannot start containers
# (crun on a host with hybrid cgroups v1/v2; no CAP_SYS_RESOURCE to raise rlimits) it falls
# back to runc and to rlimits no higher than this shell's.
set -euo pipefail
cd "$(dirname "$0")/../.."
image="${1:-localhost/gpuprof/gpuprofd:$(cat VERSION)}"
engine="${CONTAINER_ENGINE:-$(command -v podman || command -v docker || true)}"
[ -n "$engine" ] || { echo "smoke: no podman or docker" >&2; exit 1; }
name="gpuprof-smoke-$$"
socket=/var/lib/gpuprof/gpuprofd.sock

# rlimits: the engines raise nofile/nproc by default, which needs CAP_SYS_RESOURCE.
limit() {
  if [ "$1" = unlimited ] || [ "$1" -gt 4096 ]; then echo 4096; else echo "$1"; fi
}
nofile=$(limit "$(ulimit -Hn)")
nproc=$(limit "$(ulimit -Hu)")
run_args=(--network=none --ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")
err=$(mktemp)
if ! "$engine" run --rm "${run_args[@]}" --entrypoint /bin/true "$image" 2>"$err"; then
  if [ "$(basename "$engine")" = podman ] && command -v runc >/dev/null &&
     "$engine" --runtime runc run --rm "${run_args[@]}" --entrypoint /bin/true "$image"; then
    echo "smoke: podman's default runtime failed ($(tail -n 1 "$err")); using runc"
    engine_args=(--runtime runc)
  else
    cat "$err" >&2
    echo "smoke: cannot start a container here" >&2
    exit 1
  fi
fi
rm -f "$err"
engine_cmd=("$engine" "${engine_args[@]+"${engine_args[@]}"}")

cleanup() { "${engine_cmd[@]}" rm -f "$name" >/dev/null 2>&1 || true; }
trap cleanup EXIT

"${engine_cmd[@]}" run -d --name "$name" "${run_args[@]}" "$image" \
  --state_dir=/var/lib/gpuprof --listen="unix:$socket" >/dev/null
gpus=""
for _ in $(seq 1 60); do
  if gpus=$("${engine_cmd[@]}" exec "$name" gpuprof --target "unix:$socket" gpus 2>&1); then
    break
  fi
  if [ "$("${engine_cmd[@]}" inspect -f '{{.State.Running}}' "$name")" != true ]; then
    "${engine_cmd[@]}" logs "$name" >&2
    echo "smoke: gpuprofd exited" >&2
    exit 1
  fi
  gpus=""
  sleep 0.5
done
echo "$gpus"
if ! grep -q '^workloads:' <<<"$gpus"; then
  "${engine_cmd[@]}" logs "$name" >&2
  echo "smoke: gpuprof gpus got no answer from gpuprofd in the image" >&2
  exit 1
fi

unresolved=$("${engine_cmd[@]}" exec "$name" sh -c \
  'for b in /usr/local/bin/gpuprofd /usr/local/bin/gpuprof /usr/local/lib/gpuprof/gpuprof_worker \
            /usr/local/lib/gpuprof/cuda/*.so*; do ldd "$b" | sed "s|^|$b: |"; done' |
  grep 'not found' | grep -v 'libcuda\.so' || true)
if [ -n "$unresolved" ]; then
  echo "$unresolved" >&2
  echo "smoke: libraries missing from the image" >&2
  exit 1
fi
cudnn=$("${engine_cmd[@]}" exec "$name" sh -c 'ls /usr/local/lib/gpuprof/cuda/libcudnn.so.9' \
          2>/dev/null || true)
echo "smoke: every linked library resolves in the image; cuDNN: ${cudnn:-not in the image}"

"${engine_cmd[@]}" stop -t 20 "$name" >/dev/null
status=$("${engine_cmd[@]}" inspect -f '{{.State.ExitCode}}' "$name")
if [ "$status" != 0 ]; then
  "${engine_cmd[@]}" logs "$name" >&2
  echo "smoke: gpuprofd exited with status $status on SIGTERM" >&2
  exit 1
fi
echo "smoke: ok: $image ran gpuprofd, answered gpuprof gpus, stopped on SIGTERM"
