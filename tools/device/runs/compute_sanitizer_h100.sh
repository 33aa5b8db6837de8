#!/usr/bin/env bash
# compute-sanitizer (memcheck, racecheck, initcheck, synccheck) over the tests of every kernel
# we write: the copy kernels (index/store, JIT-compiled), the input fill and cache check, the
# attention kernels, and the measurement's own kernels (stream blocker, L2 flush) through the
# timing-loop and probe tests. Prints one line per test and tool with the error summary.
set -uo pipefail
tar xJf .xfer/carry.tar.xz
B=$PWD/.carry/bin; export LD_LIBRARY_PATH=$PWD/.carry/lib:/usr/local/cuda/lib64
export TEST_SRCDIR=$PWD/.carry/runfiles TEST_WORKSPACE=. TEST_TMPDIR=$(mktemp -d)
S=/tmp/sanitizer; mkdir -p $S
CS=/usr/local/cuda/bin/compute-sanitizer
$CS --version | tail -1 | tee $S/version.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $S/version.txt
tests="${SANITIZER_TESTS:-copy_kernels_gpu_test device_inputs_gpu_test attention_gpu_test timing_loop_gpu_test gpu_probe_gpu_test}"
for t in $tests; do
  [ -x $B/$t ] || { echo "$t: not in the bundle"; continue; }
  for tool in memcheck racecheck initcheck synccheck; do
    extra=""
    [ $tool = memcheck ] && extra="--leak-check full"
    start=$(date +%s)
    timeout ${SANITIZER_TIMEOUT:-240} $CS --tool $tool $extra --error-exitcode 86 \
      --print-limit 20 $B/$t ${GTEST_ARGS:-} > $S/$t.$tool.log 2>&1
    rc=$?
    summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY" $S/$t.$tool.log | tr '\n' ' ')
    tests_line=$(grep -E "^\[  (PASSED|FAILED)  \]" $S/$t.$tool.log | tr '\n' ' ')
    echo "$t $tool rc=$rc $(( $(date +%s) - start ))s :: $summary :: $tests_line"
  done
done | tee $S/summary.txt
tar czf $OUT/sanitizer.tgz -C $S .
