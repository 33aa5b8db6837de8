#!/usr/bin/env bash
# Runs (each step under a time limit) the attention GPU tests, the benchmark with its PyTorch peers, and compute-sanitizer over
# the tests, on this machine's GPU 0, from a bundle of prebuilt binaries (no Bazel needed):
#   BUNDLE/bin/attention_gpu_test, BUNDLE/bin/attention_benchmark, BUNDLE/lib/*.so (abseil),
#   BUNDLE/torch_attention_peers.py
#   run_attention_gpu.sh BUNDLE [tests|bench|sanitize|all]...   (logs under ${OUT:-/tmp/attention-gpu})
set -uo pipefail
bundle=$(cd "${1:?bundle folder}" && pwd)
shift
steps=${*:-all}
out=${OUT:-/tmp/attention-gpu}
mkdir -p "$out"
export LD_LIBRARY_PATH=$bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
status=0
want() { [[ " $steps " == *" $1 "* || " $steps " == *" all "* ]]; }

nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
  --format=csv | tee "$out/gpu.txt"
if want tests; then
  timeout 200 "$bundle/bin/attention_gpu_test" >"$out/gpu_test.log" 2>&1 || status=1
  grep -E "^\[check\]|^\[  FAILED|^\[  PASSED|tests? ran" "$out/gpu_test.log"
  grep -B2 -A6 "Failure" "$out/gpu_test.log" | head -60
fi
if want bench; then
  timeout 180 "$bundle/bin/attention_benchmark" --table="$out/ours.md" >"$out/bench.log" 2>&1 || status=1
  tail -3 "$out/bench.log"
  PYTHONUNBUFFERED=1 timeout 180 python3 "$bundle/torch_attention_peers.py" --table "$out/torch.md" \
    >"$out/torch.log" 2>&1 || status=1
  tail -2 "$out/torch.log"
fi
if want sanitize; then
  # The long shapes are left out: the reference kernel is slow under memcheck.
  timeout 300 compute-sanitizer --tool memcheck --error-exitcode 3 "$bundle/bin/attention_gpu_test" \
    --gtest_filter='-*long*:*page64*' >"$out/sanitizer.log" 2>&1 || status=1
  grep -E "ERROR SUMMARY|PASSED|FAILED" "$out/sanitizer.log" | tail -4
fi
[ -f "$out/ours.md" ] && cat "$out/ours.md"
[ -f "$out/torch.md" ] && cat "$out/torch.md"
exit $status
