// `gpuprof board WORKLOAD [shape flags]`: the finished, verified experiments of a shape ranked
// by the workload's headline (workloads/headline, what list and compare show), across users and
// kernels (ours and every submitted source). Pure: the command pages the List RPC and hands the
// experiments here.
#ifndef GPUPROF_CLIENT_BOARD_H_
#define GPUPROF_CLIENT_BOARD_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/struct.pb.h"
#include "gpuprof/v1/experiment.pb.h"
#include "workloads/headline.h"

namespace gpuprof::client {

struct BoardRow {
  int rank = 0;
  v1::Experiment experiment;
  workloads::Headline headline;
  // The figure as a fraction of the best one (1 for the best; below 1 for the others).
  double ratio_to_best = 1;
  // "ours", or "NAME@SHA12 (file)".
  std::string kernel;
  // Its GPUs' names, when known ("NVIDIA H100 80GB HBM3").
  std::string gpu;
};

// FINISHED, and its output checked and right: the result's verification, or for a custom
// kernel every one of its checks.
bool IsVerified(const v1::Experiment& experiment);

// Whether the experiment ran `shape`: each of `fields` (spec fields of the workload) has the
// value `shape` gives it in the experiment's request, the workload's defaults filled in where
// the request left the field unset.
bool MatchesShape(const v1::Experiment& experiment, const v1::ExperimentRequest& shape,
                  const std::vector<const google::protobuf::FieldDescriptor*>& fields);

// The verified experiments that match, best headline first (ties: the earlier first); with
// `best_per_kernel` only each kernel's best (ours counts as one kernel; a source by its hash).
std::vector<BoardRow> RankBoard(const std::vector<v1::Experiment>& experiments,
                                const v1::ExperimentRequest& shape,
                                const std::vector<const google::protobuf::FieldDescriptor*>& fields,
                                bool best_per_kernel);

// The table: RANK, HEADLINE (value, unit, noise), VS BEST, KERNEL, USER, ID, GPU, DATE.
std::string RenderBoard(const std::vector<BoardRow>& rows, absl::TimeZone time_zone);

// A row as a JSON object's fields, for --json.
google::protobuf::Struct BoardRowStruct(const BoardRow& row);

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_BOARD_H_
