// What a hostile local account runs to take an experiment's watcher places (finding 4): many
// Watch streams on other people's experiments over real gRPC, as that account (the test starts
// it with RunCommandAs), held open until told to stop.
//
//   watch_flooder --target unix:PATH --experiments ID[,ID...] --streams N --channels C
//                 --hold_seconds S --status_file F
//       Opens N Watch streams on each experiment, spread over C connections, and holds the
//       admitted ones (a stream is admitted once it delivers its first event; a refused one
//       ends with an error and no event). Once every stream is settled it writes to F one line
//       "holding admitted=A refused=R", then "ID admitted=A refused=R" per experiment and
//       "refusal=MESSAGE" (the first refusal's); at the end it prints the same on stdout.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/barrier.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gpuprof/v1/profiler.grpc.pb.h"
#include "grpcpp/grpcpp.h"

ABSL_FLAG(std::string, target, "", "gpuprofd's address (unix:PATH)");
ABSL_FLAG(std::string, experiments, "", "comma-separated experiment ids to watch");
ABSL_FLAG(int, streams, 100, "Watch streams to open on each experiment");
ABSL_FLAG(int, channels, 4, "connections to spread the streams over");
ABSL_FLAG(int, hold_seconds, 20, "how long to hold the admitted streams");
ABSL_FLAG(std::string, status_file, "", "where to report once every stream is settled");

namespace {

namespace v1 = ::gpuprof::v1;

struct Tally {
  std::mutex mutex;
  std::map<std::string, int> admitted;
  std::map<std::string, int> refused;
  std::string first_refusal;
};

std::string Report(Tally& tally, const std::vector<std::string>& experiments) {
  std::lock_guard<std::mutex> lock(tally.mutex);
  int admitted = 0, refused = 0;
  std::string lines;
  for (const std::string& id : experiments) {
    admitted += tally.admitted[id];
    refused += tally.refused[id];
    absl::StrAppend(&lines, id, " admitted=", tally.admitted[id], " refused=", tally.refused[id],
                    "\n");
  }
  return absl::StrCat("holding admitted=", admitted, " refused=", refused, "\n", lines,
                      "refusal=", tally.first_refusal, "\n");
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::vector<std::string> experiments =
      absl::StrSplit(absl::GetFlag(FLAGS_experiments), ',', absl::SkipEmpty());
  const int streams = absl::GetFlag(FLAGS_streams);
  const int channel_count = std::max(1, absl::GetFlag(FLAGS_channels));
  const absl::Time until = absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_hold_seconds));

  // Distinct channel arguments make distinct connections (gRPC shares one otherwise).
  std::vector<std::unique_ptr<v1::Profiler::Stub>> stubs;
  for (int i = 0; i < channel_count; ++i) {
    grpc::ChannelArguments arguments;
    arguments.SetInt("gpuprof.watch_flooder.connection", i);
    stubs.push_back(v1::Profiler::NewStub(grpc::CreateCustomChannel(
        absl::GetFlag(FLAGS_target), grpc::InsecureChannelCredentials(), arguments)));
  }

  Tally tally;
  const int total = streams * static_cast<int>(experiments.size());
  absl::Barrier* settled = new absl::Barrier(total + 1);
  std::vector<std::thread> threads;
  for (int n = 0; n < total; ++n) {
    const std::string id = experiments[n / streams];
    v1::Profiler::Stub* stub = stubs[n % channel_count].get();
    threads.emplace_back([&tally, settled, stub, id, until] {
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(until));
      v1::WatchRequest request;
      request.set_experiment_id(id);
      std::unique_ptr<grpc::ClientReader<v1::ExperimentEvent>> reader =
          stub->Watch(&context, request);
      v1::ExperimentEvent event;
      const bool admitted = reader->Read(&event);
      grpc::Status status;
      if (!admitted) status = reader->Finish();
      {
        std::lock_guard<std::mutex> lock(tally.mutex);
        if (admitted) {
          ++tally.admitted[id];
        } else {
          ++tally.refused[id];
          if (tally.first_refusal.empty()) {
            tally.first_refusal = absl::StrCat(status.error_code(), " ", status.error_message());
          }
        }
      }
      if (settled->Block()) delete settled;
      if (!admitted) return;
      // Hold it: read whatever comes until the deadline ends the stream.
      while (reader->Read(&event)) {
      }
      reader->Finish();
    });
  }
  if (settled->Block()) delete settled;
  const std::string report = Report(tally, experiments);
  if (!absl::GetFlag(FLAGS_status_file).empty()) {
    // Written beside and renamed over, so the test never reads half a report.
    const std::string partial = absl::GetFlag(FLAGS_status_file) + ".partial";
    std::ofstream(partial) << report;
    std::rename(partial.c_str(), absl::GetFlag(FLAGS_status_file).c_str());
  }
  for (std::thread& thread : threads) thread.join();
  std::fputs(report.c_str(), stdout);
  return 0;
}
