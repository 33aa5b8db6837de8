#!/usr/bin/env bash
# Sets up a Debian 12 machine and runs the checks that need no GPU; .ci/run (CI) calls it.
# Stages (each timed; GPUPROF_CI_STAGES picks them, in this order). The default here is `plain`
# (a quick local check); .ci/run asks for "shipped image fuzz asan tsan" (docs/reliability.md).
#   plain  bazel test //...                        the CPU suite as shipped (-O2)
#   shipped  bazel test <all but the CPU tests>    CI's build as shipped: every binary, library,
#                                                  GPU test and benchmark (not run), and only the
#                                                  tests tagged `shipped_build` (bounds that hold
#                                                  only in the shipped build) or `no_sanitizer`;
#                                                  the asan stage runs the whole CPU suite
#   asan   bazel test --config=asan //...          the CPU suite under ASan + UBSan
#   tsan   bazel test --config=tsan //:tsan_tests  the daemon's concurrent parts under TSan
#   fuzz   tools/fuzzing/run_fuzzers.sh            each libFuzzer target for FUZZ_SECONDS (60)
#   image  deploy/container/check.sh               builds the image offline from a local base and
#                                                  runs gpuprof gpus in it (podman; after plain
#                                                  or shipped, whose Bazel outputs it packs)
# Extra arguments go to every `bazel test`.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh

# What the shipped stage builds: every target except the CPU tests that the asan stage runs
# (and the test suites that would name them again). The CPU tests are almost half of the
# sources and compiling them twice (-O2 here, ASan there) was a quarter of CI's time.
# The tags mirror the test filters of .bazelrc (`test` and `test:asan`): the CPU tests are
# those the asan stage runs. Written to a file for --target_pattern_file: a few hundred labels.
shipped_targets_file() {
  local cpu_tests='tests(//...) except attr(tags, "\b(gpu|benchmark|shipped_build|no_sanitizer)\b", tests(//...))'
  local file
  file="$(mktemp --tmpdir gpuprof-shipped-targets.XXXXXX)"
  bazel query --noshow_progress "//... except ($cpu_tests) except kind(test_suite, //...)" >"$file"
  echo "$file"
}

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
    shipped)
      targets="$(shipped_targets_file)"
      trap 'rm -f "$targets"' EXIT
      echo "test.sh: the shipped stage builds $(wc -l <"$targets") targets ($targets)"
      run_stage shipped bazel test --target_pattern_file="$targets" "$@"
      ;;
    asan) run_stage asan bazel test --config=asan //... "$@" ;;
    tsan) run_stage tsan bazel test --config=tsan //:tsan_tests "$@" ;;
    fuzz) run_stage fuzz tools/fuzzing/run_fuzzers.sh ;;
    image) run_stage image deploy/container/check.sh ;;
    *) echo "test.sh: unknown stage '$stage' (plain, shipped, asan, tsan, fuzz, image)" >&2; exit 2 ;;
  esac
done
echo "test.sh: all stages passed: ${timings[*]}"
