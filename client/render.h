// Text rendering of API messages for the terminal: GPUs and topology, experiment tables and
// details, results. Pure functions of their arguments (the time and time zone are passed in),
// so they are unit-tested byte for byte.
#ifndef GPUPROF_CLIENT_RENDER_H_
#define GPUPROF_CLIENT_RENDER_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "common/byte_format.h"
#include "common/experiment_states.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/message.h"
#include "google/protobuf/repeated_field.h"
#include "google/protobuf/timestamp.pb.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/v1/gpus.pb.h"
#include "gpuprof/v1/profiler.pb.h"
#include "gpuprof/v1/workloads.pb.h"
#include "workloads/headline.h"

namespace gpuprof::client {

// "queued", "running", "timed-out": the names `list --state` accepts.
std::string StateName(v1::ExperimentState state);
// "index", "radix", ...
std::string WorkloadName(v1::Workload workload);

// "0,1", or "-" when empty.
std::string FormatGpuIds(const google::protobuf::RepeatedField<int32_t>& gpu_ids);
// "850ms", "12.3s", "4m05s", "2h03m".
std::string FormatElapsed(absl::Duration duration);
// A value with a precision that suits its size: "3.14", "42.5", "2512".
std::string FormatNumber(double value);
// "2024-05-01 12:00:03" in `time_zone`.
std::string FormatLocalTime(absl::Time time, absl::TimeZone time_zone);

absl::Time ToTime(const google::protobuf::Timestamp& timestamp);
absl::Duration ToDuration(const google::protobuf::Duration& duration);

// The request as one line of proto text format: `index { num_tokens: 4096 } priority: 1`.
std::string CompactText(const google::protobuf::Message& message);
// The message as one line of JSON (NDJSON-ready): lowerCamelCase field names, enums by name,
// fields at their default value omitted (the proto3 JSON mapping's defaults).
std::string JsonLine(const google::protobuf::Message& message);

// `gpuprof gpus`: host line, GPU table, topology matrix, probe error, workloads, JIT cache.
std::string RenderGpus(const v1::ListGpusResponse& response);

// The result: provenance, timing, bandwidth, compute, verification, JIT, kernel config, radix,
// collective, what was not collected, dropped records. Lines are indented by `indent`.
std::string RenderResult(const v1::ExperimentResult& result, absl::string_view indent = "");

// The workload's headline (workloads/headline.h) with the hint of what bounds it: "2854 GB/s
// (94.8% of copy)", "412.5 TFLOP/s (41.7% of peak)", "busbw 216.0 GB/s", "1454616 match op/s
// (noise 2.1%)"; empty without a result that has one.
std::string FormatHeadline(const workloads::Headline& headline);
// `get`: the same with what bounds it and what it rests on: "2854 GB/s (94.8% of copy),
// bandwidth-bound, noise 0.4% over 12 samples".
std::string HeadlineDetails(const workloads::Headline& headline);
std::string HeadlineFigure(const v1::Experiment& experiment);

// `gpuprof list`: one row per experiment. `now` gives running experiments their run time.
std::string RenderExperimentTable(
    const google::protobuf::RepeatedPtrField<v1::Experiment>& experiments, absl::Time now,
    absl::TimeZone time_zone);

// `gpuprof get`: everything about one experiment, the result last.
std::string RenderExperiment(const v1::Experiment& experiment, absl::Time now,
                             absl::TimeZone time_zone);

// Why an experiment did not finish: "failed: <reason>" and the worker's stderr tail.
std::string RenderFailure(v1::ExperimentState state, absl::string_view reason,
                          absl::string_view worker_stderr_tail);

// For stderr: a line per row a listing left out because it does not parse, saying what to do.
// Empty when there are none.
std::string RenderDamagedRows(const google::protobuf::RepeatedPtrField<v1::DamagedRow>& rows);

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_RENDER_H_
