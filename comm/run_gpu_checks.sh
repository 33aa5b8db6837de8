#!/usr/bin/env bash
# Runs the comm/ GPU tests, the collective benchmark and the torch.distributed peer on a
# multi-GPU machine, from a folder holding bin/ (the test and benchmark binaries), lib/ (the
# non-CUDA shared libraries they link) and torch_collective_peers.py. Logs go to ${OUT:-/tmp/comm-gpu}.
#   comm/run_gpu_checks.sh <bundle folder> [benchmark flags...]
set -uo pipefail
bundle=$(cd "${1:?bundle folder}" && pwd)
shift
out=${OUT:-/tmp/comm-gpu}
mkdir -p "$out"
# NVLink multicast stays off on shared machines: NCCL, PyTorch and NVSHMEM alike.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export LD_LIBRARY_PATH=$bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
status=0
{
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
  nvidia-smi topo -m
} >"$out/host.txt" 2>&1
cat "$out/host.txt"
for test in "$bundle"/bin/*_test; do
  name=$(basename "$test")
  start=$(date +%s%N)
  # NCCL's own warnings explain a failure; they go to the test's log only.
  if NCCL_DEBUG=${NCCL_DEBUG:-WARN} timeout 250 "$test" >"$out/$name.log" 2>&1; then result=PASS; else result=FAIL; status=1; fi
  echo "$result $name ($(( ($(date +%s%N) - start) / 1000000 )) ms)"
  grep -E '^\[  (PASSED|FAILED|SKIPPED) |^(mode|init|rank|NCCL) ' "$out/$name.log"
  [ $result = FAIL ] && tail -40 "$out/$name.log"
done
if [ -x "$bundle/bin/collective_benchmark" ]; then
  # Should one buffer mode fail to set up, still measure the others.
  timeout 200 "$bundle/bin/collective_benchmark" "$@" 2>&1 | tee "$out/collective_benchmark.log" ||
    { status=1; timeout 200 "$bundle/bin/collective_benchmark" --modes=device,registered "$@" 2>&1 |
      tee "$out/collective_benchmark_fallback.log"; }
fi
if [ -f "$bundle/torch_collective_peers.py" ]; then
  PYTHONUNBUFFERED=1 timeout 180 python3 "$bundle/torch_collective_peers.py" 2>&1 |
    grep -v Warning | tee "$out/torch_collective_peers.log" || status=1
fi
exit $status
