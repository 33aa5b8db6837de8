#!/usr/bin/env bash
# Sets up a Debian 12 machine and runs the checks that need no GPU; .ci/run (CI) calls it.
# Stages (each timed; GPUPROF_CI_STAGES picks them, in this order). The default here is `plain`
# (a quick local check); .ci/run asks for all five: "plain image fuzz asan tsan"
# (docs/reliability.md).
#   plain  bazel test //...                        the CPU suite as shipped (-O2)
#   asan   bazel test --config=asan //...          the CPU suite under ASan + UBSan
#   tsan   bazel test --config=tsan //:tsan_tests  the daemon's concurrent parts under TSan
#   fuzz   tools/fuzzing/run_fuzzers.sh            each libFuzzer target for FUZZ_SECONDS (60)
#   image  deploy/container/check.sh               builds the image offline from a local base and
#                                                  runs gpuprof gpus in it (podman; after plain,
#                                                  whose Bazel outputs it packs)
# Extra arguments go to every `bazel test`.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh

stages="${GPUPROF_CI_STAGES:-plain}"
timings=()
run_stage() {
  local name="$1"
  shift
  local start=$SECONDS
  echo "test.sh: stage $name: $*"
  "$@"
  timings+=("$name $((SECONDS - start))s")
  echo "test.sh: stage $name passed in $((SECONDS - start))s"
}

for stage in $stages; do
  case "$stage" in
    plain) run_stage plain bazel test //... "$@" ;;
    asan) run_stage asan bazel test --config=asan //... "$@" ;;
    tsan) run_stage tsan bazel test --config=tsan //:tsan_tests "$@" ;;
    fuzz) run_stage fuzz tools/fuzzing/run_fuzzers.sh ;;
    image) run_stage image deploy/container/check.sh ;;
    *) echo "test.sh: unknown stage '$stage' (plain, asan, tsan, fuzz, image)" >&2; exit 2 ;;
  esac
done
echo "test.sh: all stages passed: ${timings[*]}"
