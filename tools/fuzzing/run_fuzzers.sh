#!/usr/bin/env bash
# Builds every libFuzzer target (tag fuzz_target) with clang, ASan and UBSan (--config=fuzz) and
# fuzzes each for a bounded time, starting from its seed corpus in the repository.
#   FUZZ_SECONDS   time per target (default 60)
#   FUZZ_ARTIFACTS where crashing inputs are written (default /tmp/gpuprof-fuzz-artifacts)
#   FUZZ_SEED      libFuzzer's random seed (default: a new one each run, to explore)
#   FUZZ_RUNS      inputs per target (default: as many as fit in FUZZ_SECONDS)
# FUZZ_SEED and FUZZ_RUNS (as CI sets them) bound a run; they do not make two machines try the
# same inputs (abseil's per-process hash salt, the corpus's directory order), so fuzz longer with
# fresh seeds before a change goes to CI (docs/reliability.md).
# A crash fails the script. To keep it as a regression test, copy the input into the target's
# <name>_corpus/ directory: <name>_corpus_test replays that directory in every build.
set -euo pipefail
cd "$(dirname "$0")/../.."

seconds="${FUZZ_SECONDS:-60}"
artifacts="${FUZZ_ARTIFACTS:-/tmp/gpuprof-fuzz-artifacts}"
mkdir -p "$artifacts"

mapfile -t targets < <(bazel query --noshow_progress 'attr(tags, fuzz_target, kind(cc_binary, //...))' 2>/dev/null)
if [ "${#targets[@]}" -eq 0 ]; then
  echo "run_fuzzers: no fuzz targets found" >&2
  exit 1
fi
bazel build --config=fuzz "${targets[@]}"
bin_dir="$(bazel info --config=fuzz bazel-bin 2>/dev/null)"

repeatable=()
[ -n "${FUZZ_SEED:-}" ] && repeatable+=("-seed=$FUZZ_SEED")
[ -n "${FUZZ_RUNS:-}" ] && repeatable+=("-runs=$FUZZ_RUNS")

failed=()
for target in "${targets[@]}"; do
  package="${target#//}"; package="${package%%:*}"
  name="${target##*:}"
  work="$(mktemp -d)"
  echo "run_fuzzers: $target for ${seconds}s"
  # New inputs go to the scratch directory; the repository's corpus is only read.
  if ! "$bin_dir/$package/$name" -max_total_time="$seconds" "${repeatable[@]}" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$artifacts/$name-" \
      "$work" "$package/${name}_corpus" >"$artifacts/$name.log" 2>&1; then
    failed+=("$target")
    tail -n 40 "$artifacts/$name.log" >&2
  else
    grep -E "stat::number_of_executed_units|cov:" "$artifacts/$name.log" | tail -n 2 || true
  fi
  rm -rf "$work"
done

if [ "${#failed[@]}" -gt 0 ]; then
  echo "run_fuzzers: crashes in ${failed[*]}; inputs in $artifacts" >&2
  exit 1
fi
echo "run_fuzzers: ${#targets[@]} targets ran (${seconds}s cap${FUZZ_RUNS:+, $FUZZ_RUNS runs}${FUZZ_SEED:+, seed $FUZZ_SEED}) without a finding"
