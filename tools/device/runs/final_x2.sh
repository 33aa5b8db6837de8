#!/usr/bin/env bash
# The final GPU check on 2 GPUs: every gpu-tagged test (NVML health included), the daemon with
# index --tp 2, collectives (graphs and eager, with NCCL's choices), a sweep over both GPUs,
# attention, faults, GPU health in `gpuprof gpus`, and the tracing overhead benchmark.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
tar xJf .xfer/carry.tar.xz
S=/tmp/suite; mkdir -p $S
C='submit index --gpus 0,1 --tp 2 --tokens 16384 --hidden 4096 --follow
submit index --gpus 0,1 --tp 2 --tokens 64 --hidden 4096 --dtype fp16 --follow
submit index --gpus 0 --tokens 16384 --hidden 4096 --follow
submit collective --gpus 0,1 --op all-reduce --min-bytes 8 --max-bytes 256M --step-factor 32 --follow
submit collective --gpus 0,1 --op reduce-scatter --dtype bf16 --min-bytes 1K --max-bytes 64M --step-factor 64 --eager --follow
submit collective --gpus 0,1 --timeout 10s --label gpuprof.fault=hang@1 --follow
submit index --gpus 0,1 --tp 2 --label gpuprof.fault=crash@1 --follow
gpus
submit index --gpus 0,1 --tp 2 --tokens 4096 --follow
submit attention --gpus 1 --batch-size 64 --kv-len 4096 --trace full --follow
story exp-000010
sweep index --tokens 64,4Ki,16Ki --hidden 1536,2048,8192 --gpu-count 1 --max-iters 50 --follow --format markdown
gpus
list'
GPU_SUITE_COMMANDS="$C" GPUPROF_DAEMON_FLAGS=--enable_test_faults OUT=$S timeout 460 tools/device/run_gpu_suite.sh > $S/suite.log 2>&1
echo "suite rc=$?" >> $S/suite.log
LD_LIBRARY_PATH=$PWD/.carry/lib:/usr/local/cuda/lib64 timeout 60 .carry/bin/tracing_overhead_benchmark > $S/tracing_overhead.log 2>&1
grep -E "^(PASS|FAIL)|rc=" $S/suite.log
tar czf $OUT/suite.tgz -C $S .
grep -E "^\\$|failed|bandwidth:|verification:|kernel config|GPU [01] .*(free|exp)" $S/experiments.txt | cut -c1-330 | head -60
tail -9 $S/tracing_overhead.log
