// How fast the daemon turns sweep points into results: submits a sweep of --points points of
// one workload to a running gpuprofd, follows it, and prints points per second for the whole
// sweep and the wall time per point (queue to result, and run alone). Then runs
// --sequential_points single experiments one after another and prints the client's submit to
// result time, the figure a user waiting on one small point sees.
//
//   bazel build //bench:sweep_throughput_benchmark
//   bazel-bin/bench/sweep_throughput_benchmark --target=unix:$HOME/.local/state/gpuprof/gpuprofd.sock \
//       --workload=index --gpu_count=1      # one GPU
//   ... --workload=index --gpu_count=2      # points spread over two GPUs
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gpuprof/v1/profiler.grpc.pb.h"
#include "grpcpp/grpcpp.h"

ABSL_FLAG(std::string, target, "", "gpuprofd address (default: $GPUPROF_TARGET)");
ABSL_FLAG(std::string, workload, "index", "index, store, attention, collective or radix");
ABSL_FLAG(int, points, 100, "points in the sweep");
ABSL_FLAG(int, gpu_count, 1, "GPUs the sweep may use at once (its max_concurrent_gpus)");
ABSL_FLAG(std::string, axis, "",
          "the swept field (default: num_tokens for index/store, kv_len for attention, "
          "bytes_per_rank for collective, seed for radix)");
ABSL_FLAG(int64_t, first_value, 64, "the axis takes first_value, first_value+1, ...");
ABSL_FLAG(int, sequential_points, 20, "single experiments submitted one after another");
ABSL_FLAG(std::string, user, "bench", "submit as this user");

namespace {

namespace v1 = ::gpuprof::v1;

absl::Time ToTime(const google::protobuf::Timestamp& time) {
  return absl::FromUnixNanos(time.seconds() * 1'000'000'000 + time.nanos());
}

double Percentile(std::vector<double> values, double fraction) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, static_cast<size_t>(fraction * values.size()))];
}

void PrintDistribution(const char* what, const std::vector<double>& milliseconds) {
  std::printf("%-34s median %8.1f ms  p90 %8.1f ms  max %8.1f ms  (%zu)\n", what,
              Percentile(milliseconds, 0.5), Percentile(milliseconds, 0.9),
              Percentile(milliseconds, 1.0), milliseconds.size());
}

std::string DefaultAxis(const std::string& workload) {
  if (workload == "index" || workload == "store") return "num_tokens";
  if (workload == "attention") return "kv_len";
  if (workload == "collective") return "bytes_per_rank";
  return "seed";
}

// The base request: the workload with its defaults, one GPU per point (collectives: all of
// --gpu_count), no tracing (the benchmark measures the path, not CUPTI).
v1::ExperimentRequest BaseRequest(const std::string& workload, int gpu_count) {
  v1::ExperimentRequest request;
  const auto* field = request.GetDescriptor()->FindFieldByName(workload);
  if (field == nullptr || field->containing_oneof() == nullptr) {
    std::fprintf(stderr, "--workload: \"%s\" is not a workload\n", workload.c_str());
    std::exit(2);
  }
  request.GetReflection()->MutableMessage(&request, field);
  if (workload != "radix") {
    request.mutable_gpus()->set_gpu_count(workload == "collective" ? gpu_count : 1);
    request.mutable_tracing()->set_level(v1::TracingOptions::LEVEL_OFF);
  }
  request.set_user(absl::GetFlag(FLAGS_user));
  return request;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::string target = absl::GetFlag(FLAGS_target);
  if (target.empty() && std::getenv("GPUPROF_TARGET") != nullptr) target = std::getenv("GPUPROF_TARGET");
  if (target.empty()) target = "127.0.0.1:7070";
  const std::string workload = absl::GetFlag(FLAGS_workload);
  const int points = absl::GetFlag(FLAGS_points);
  const int gpu_count = absl::GetFlag(FLAGS_gpu_count);
  const std::string axis =
      absl::GetFlag(FLAGS_axis).empty() ? DefaultAxis(workload) : absl::GetFlag(FLAGS_axis);

  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(64 << 20);
  auto stub = v1::Profiler::NewStub(
      grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), arguments));

  v1::SweepRequest request;
  *request.mutable_base() = BaseRequest(workload, gpu_count);
  request.set_user(absl::GetFlag(FLAGS_user));
  request.set_max_concurrent_gpus(workload == "radix" ? 0 : gpu_count);
  request.set_description("sweep throughput benchmark");
  v1::SweepAxis& sweep_axis = *request.add_axes();
  sweep_axis.set_field(axis);
  sweep_axis.mutable_range()->set_start(absl::GetFlag(FLAGS_first_value));
  sweep_axis.mutable_range()->set_end(absl::GetFlag(FLAGS_first_value) + points - 1);

  const absl::Time submitted = absl::Now();
  v1::Sweep sweep;
  {
    grpc::ClientContext context;
    const grpc::Status status = stub->SubmitSweep(&context, request, &sweep);
    if (!status.ok()) {
      std::fprintf(stderr, "SubmitSweep: %s\n", status.error_message().c_str());
      return 1;
    }
  }
  const absl::Time accepted = absl::Now();
  std::printf("%s: %d points of %s over %s, at most %d GPU(s) at once, on %s\n", sweep.id().c_str(),
              sweep.points_total(), workload.c_str(), axis.c_str(), gpu_count, target.c_str());
  v1::WatchSweepRequest watch;
  watch.set_sweep_id(sweep.id());
  grpc::ClientContext watch_context;
  auto reader = stub->WatchSweep(&watch_context, watch);
  v1::SweepEvent event;
  v1::SweepState state = v1::SWEEP_RUNNING;
  while (reader->Read(&event)) state = event.state();
  const absl::Time done = absl::Now();
  if (!reader->Finish().ok() || state == v1::SWEEP_RUNNING) {
    std::fprintf(stderr, "the sweep stream ended early\n");
    return 1;
  }
  // Every page of the points (GetSweep returns them a page at a time).
  std::vector<v1::SweepPoint> stored_points;
  v1::GetSweepRequest get;
  get.set_sweep_id(sweep.id());
  get.set_points_page_size(5000);
  do {
    grpc::ClientContext get_context;
    if (!stub->GetSweep(&get_context, get, &sweep).ok()) break;
    stored_points.insert(stored_points.end(), sweep.points().begin(), sweep.points().end());
    get.set_points_page_token(sweep.next_points_page_token());
  } while (!get.points_page_token().empty());

  std::vector<double> queue_to_result_ms, run_ms;
  for (const v1::SweepPoint& point : stored_points) {
    const v1::Experiment& experiment = point.experiment();
    if (point.state() != v1::FINISHED) continue;
    queue_to_result_ms.push_back(
        absl::ToDoubleMilliseconds(ToTime(experiment.finished()) - ToTime(experiment.created())));
    run_ms.push_back(
        absl::ToDoubleMilliseconds(ToTime(experiment.finished()) - ToTime(experiment.started())));
  }
  const double seconds = absl::ToDoubleSeconds(done - submitted);
  std::printf("sweep %s: %d finished, %d failed\n", state == v1::SWEEP_FINISHED ? "finished" : "ended",
              sweep.points_finished(), sweep.points_failed());
  std::printf("%-34s %8.1f ms\n", "submit (validate + store all)",
              absl::ToDoubleMilliseconds(accepted - submitted));
  std::printf("%-34s %8.2f s\n", "submit to last result", seconds);
  std::printf("%-34s %8.2f\n", "points per second", sweep.points_finished() / seconds);
  PrintDistribution("per point, queued to result", queue_to_result_ms);
  PrintDistribution("per point, started to result", run_ms);

  // One point at a time, as a user waiting on each: Submit's stream from the call to the
  // terminal event.
  std::vector<double> single_ms;
  for (int i = 0; i < absl::GetFlag(FLAGS_sequential_points); ++i) {
    v1::ExperimentRequest single = request.base();
    const auto* spec_field = single.GetDescriptor()->FindFieldByName(workload);
    auto* spec = single.GetReflection()->MutableMessage(&single, spec_field);
    const auto* axis_field = spec->GetDescriptor()->FindFieldByName(axis);
    if (axis_field != nullptr && axis_field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_INT64) {
      spec->GetReflection()->SetInt64(spec, axis_field, absl::GetFlag(FLAGS_first_value) + i % points);
    }
    const absl::Time start = absl::Now();
    grpc::ClientContext context;
    auto stream = stub->Submit(&context, single);
    v1::ExperimentEvent update;
    v1::ExperimentState last = v1::EXPERIMENT_STATE_UNSPECIFIED;
    while (stream->Read(&update)) {
      if (update.has_state()) last = update.state().state();
    }
    stream->Finish();
    if (last == v1::FINISHED) single_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
  }
  PrintDistribution("single point, submit to result", single_ms);
  return state == v1::SWEEP_FINISHED ? 0 : 1;
}
