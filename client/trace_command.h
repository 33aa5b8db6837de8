// `gpuprof trace ID -o trace.json` (or `-o -` for standard output, `-o trace.json.gz` or `--gzip`
// for gzip): reads back what an experiment stored (its events, replayed
// by Watch from seq 1: activity batches, the result, the final state) and writes its timeline
// as a Chrome trace that Perfetto and chrome://tracing load. The fetch is shared with
// `gpuprof story` (story_command.h).
#ifndef GPUPROF_CLIENT_TRACE_COMMAND_H_
#define GPUPROF_CLIENT_TRACE_COMMAND_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/v1/profiler.grpc.pb.h"
#include "grpcpp/support/status.h"

namespace gpuprof::client {

// An experiment's activity as the daemon stored it.
struct ExperimentActivity {
  std::string experiment_id;
  std::vector<v1::ActivityRecord> records;
  // The result event, if the experiment produced one; its dropped_activity_records is raised
  // to the batches' own count when that is higher (a run that died before its result).
  v1::ExperimentResult result;
  bool has_result = false;
  // The last state seen (FINISHED, FAILED, ... once the experiment ended).
  v1::ExperimentState state = v1::EXPERIMENT_STATE_UNSPECIFIED;
  std::string state_reason;
  int64_t activity_batches = 0;
};

// Replays the experiment's events with Watch(from_seq = 1). For an experiment still running
// this waits until it ends, since Watch streams until then. The gRPC status of the stream.
grpc::Status FetchExperimentActivity(v1::Profiler::StubInterface& profiler,
                                     const std::string& experiment_id,
                                     ExperimentActivity& activity);

// The path that means standard output.
inline constexpr char kStandardOutputPath[] = "-";

// Whether the trace is written gzipped: when asked, or when `path` ends in ".gz".
bool TraceWantsGzip(const std::string& path, bool gzip_flag);

// Writes the Chrome trace of `activity` to `path`, or to `standard_output` when `path` is "-";
// gzipped (one gzip member, which Perfetto opens as it is) when `gzip`.
absl::Status WriteChromeTrace(const ExperimentActivity& activity, const std::string& path,
                              bool gzip, std::ostream& standard_output);

// "wrote 812 records (3 phases, 640 kernels, 640 launches) of exp-1 to trace.json; open it in
// https://ui.perfetto.dev or chrome://tracing", plus a warning line when the experiment has
// no records or dropped some.
std::string DescribeWrittenTrace(const ExperimentActivity& activity, const std::string& path);

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_TRACE_COMMAND_H_
