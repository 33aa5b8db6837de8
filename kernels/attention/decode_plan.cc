#include "kernels/attention/decode_plan.h"

#include <algorithm>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace gpuprof::attention {

absl::StatusOr<DecodePlan> PlanDecode(const DecodePlanInput& input) {
  if (input.batch <= 0 || input.num_kv_heads <= 0 || input.group_size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("batch (", input.batch, "), num_kv_heads (",
                                                   input.num_kv_heads, ") and group_size (",
                                                   input.group_size, ") must be positive"));
  }
  if (input.max_q_len < 1 || input.max_q_len > kMaxDecodeQLen) {
    return absl::InvalidArgumentError(absl::StrCat("max_q_len (", input.max_q_len,
                                                   ") must be in 1..", kMaxDecodeQLen,
                                                   " for the decode kernel"));
  }
  if (input.requested_splits < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("requested_splits (", input.requested_splits, ") must be >= 0"));
  }
  if (input.tensor_core_blocks_per_sm > 0 && PlanMayUseTensorCores(input)) {
    return PlanTensorCoreDecode(input);
  }
  // One kernel's plan for `blocks_per_sm` resident blocks.
  auto plan_for = [&](int blocks_per_sm) {
    DecodePlan plan;
    const int rows = input.group_size * input.max_q_len;
    // Rows padded to a power of two cost a group of 5 or 7 the math of 8 rows (and their
    // registers); an exact count is instantiated for each of 1..kMaxDecodeRowsPerBlock.
    plan.row_chunks = (rows + kMaxDecodeRowsPerBlock - 1) / kMaxDecodeRowsPerBlock;
    plan.rows_per_block = (rows + plan.row_chunks - 1) / plan.row_chunks;
    const int64_t base_blocks =
        static_cast<int64_t>(input.batch) * input.num_kv_heads * plan.row_chunks;
    const int longest_useful = std::max(1, input.max_kv_len / kMinKvRowsPerSplit);
    if (input.requested_splits > 0) {
      plan.num_splits = std::clamp(input.requested_splits, 1,
                                   std::max(1, std::min(input.max_kv_len, kMaxDecodeSplits)));
    } else {
      // As many splits as fit in one wave of resident blocks: a second, partial wave would
      // leave most SMs idle at the end (seen on H100 at batch 32: 3 splits, 1.45 waves, no
      // faster than unsplit).
      const int64_t slots =
          static_cast<int64_t>(std::max(1, input.sm_count)) * std::max(1, blocks_per_sm);
      const int64_t wanted = slots / base_blocks;
      plan.num_splits = static_cast<int>(
          std::clamp<int64_t>(wanted, 1, std::min(longest_useful, kMaxDecodeSplits)));
    }
    plan.blocks = base_blocks * plan.num_splits;
    return plan;
  };
  auto waves = [&](const DecodePlan& plan, int blocks_per_sm) {
    const int64_t slots =
        static_cast<int64_t>(std::max(1, input.sm_count)) * std::max(1, blocks_per_sm);
    return static_cast<double>((plan.blocks + slots - 1) / slots);
  };
  DecodePlan plain = plan_for(input.blocks_per_sm);
  if (input.prefetch_blocks_per_sm <= 0) return plain;
  DecodePlan prefetching = plan_for(input.prefetch_blocks_per_sm);
  prefetching.prefetch = true;
  const double plain_cost = waves(plain, input.blocks_per_sm);
  const double prefetch_cost =
      waves(prefetching, input.prefetch_blocks_per_sm) * kPrefetchBlockCost;
  return prefetch_cost <= plain_cost ? prefetching : plain;
}

bool PlanMayUseTensorCores(const DecodePlanInput& input) {
  const int rows = input.group_size * input.max_q_len;
  const bool rows_at_any_batch =
      input.tensor_core_rows_at_any_batch > 0 && rows >= input.tensor_core_rows_at_any_batch;
  return rows <= input.tensor_core_max_rows * input.tensor_core_max_row_chunks &&
         (rows_at_any_batch ||
          static_cast<int64_t>(input.batch) * input.num_kv_heads <= kTensorCoreMaxSequenceHeads);
}

absl::StatusOr<DecodePlan> PlanTensorCoreDecode(const DecodePlanInput& input) {
  const int rows = input.group_size * input.max_q_len;
  const int most_rows = input.tensor_core_max_rows * input.tensor_core_max_row_chunks;
  if (rows > most_rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "group_size x max_q_len (", rows, ") exceeds the tensor-core kernel's ", most_rows,
        " rows at this head_dim"));
  }
  const int row_chunks = (rows + input.tensor_core_max_rows - 1) / input.tensor_core_max_rows;
  // Splits are planned for the blocks of every chunk, as for KV heads of one row each.
  DecodePlanInput one_row = input;
  one_row.num_kv_heads = input.num_kv_heads * row_chunks;
  one_row.group_size = 1;
  one_row.max_q_len = 1;
  one_row.blocks_per_sm = std::max(1, input.tensor_core_blocks_per_sm);
  one_row.prefetch_blocks_per_sm = 0;
  one_row.tensor_core_blocks_per_sm = 0;
  ASSIGN_OR_RETURN(DecodePlan plan, PlanDecode(one_row));
  plan.rows_per_block = input.tensor_core_max_rows;
  plan.row_chunks = row_chunks;
  plan.tensor_cores = true;
  return plan;
}

std::vector<int> DecodeSplitCandidates(int planned_splits, int max_kv_len, int forced_splits) {
  if (forced_splits > 0) return {forced_splits};
  const int most = std::min({kMaxDecodeSplits, std::max(1, max_kv_len / kMinTunedKvRowsPerSplit),
                             std::max(1, planned_splits) * kMaxTunedSplitsOverPlan});
  std::vector<int> splits;
  for (int s = 1; s <= most; s *= 2) splits.push_back(s);
  if (planned_splits >= 1 &&
      std::find(splits.begin(), splits.end(), planned_splits) == splits.end()) {
    splits.push_back(planned_splits);
  }
  std::sort(splits.begin(), splits.end());
  return splits;
}

}  // namespace gpuprof::attention
