// Load generator for a running gpuprofd: N concurrent clients submit, watch, list and cancel
// over gRPC for a bounded time while the Prometheus endpoint is scraped every 200 ms. Prints
// Submit acknowledgement latency (p50/p99/max), durable submits per second (an acknowledgement
// is the stored QUEUED event, sent after its commit), Watch delivery latency, List latency,
// and the daemon's RSS and open file descriptors at start and end.
//
//   load_generator --target unix:/path/gpuprofd.sock --daemon_pid PID --clients 200
//       --duration 60s --metrics_port 9464 [--prefill 100000]   (one line)
//
// Durability under load: run with --acked_ids_out=FILE, kill -9 the daemon mid-run, restart
// it, then `load_generator --target ... --verify_acked_ids=FILE` checks every acknowledged
// submission is there.
//
// --prefill first submits (and cancels) that many experiments as fast as the clients can, so
// that List is measured over a large store.
#include <dirent.h>

#include <algorithm>
#include <atomic>
#include <chrono>
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
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "google/protobuf/util/time_util.h"
#include "gpuprof/v1/profiler.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "tests/metrics/http_client.h"

ABSL_FLAG(std::string, target, "", "gpuprofd's address, e.g. unix:/run/gpuprofd.sock");
ABSL_FLAG(int, daemon_pid, 0, "gpuprofd's pid, for RSS and fd counts (0: not reported)");
ABSL_FLAG(int, clients, 200, "Concurrent clients (threads, each with its own channel)");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(60), "How long the measured phase lasts");
ABSL_FLAG(int, metrics_port, 9464, "gpuprofd's metrics port on 127.0.0.1 (0: no scraping)");
ABSL_FLAG(int64_t, prefill, 0, "Experiments to submit before the measured phase");
ABSL_FLAG(bool, cancel, true,
          "Cancel each experiment after its acknowledgement (keeps the queue short); without, "
          "the measured phase is submissions and lists only (the watchers still cancel)");
ABSL_FLAG(int, watchers, 8, "Clients that keep a Watch open on their latest experiment");
ABSL_FLAG(double, rate, 0,
          "Submits per second offered by all clients together, evenly paced (open loop); 0: "
          "each client submits again as soon as its previous round is done (closed loop, the "
          "most the daemon sustains). Paced latencies count from the scheduled time, so a "
          "daemon that falls behind is not hidden");
ABSL_FLAG(std::string, acked_ids_out, "",
          "Write the id of every acknowledged submission to this file, one a line (to check "
          "after a kill -9 and restart with --verify_acked_ids)");
ABSL_FLAG(bool, connect_first, true,
          "Connect every client's channel before the measured phase (false: the first RPCs "
          "also set up the connections)");
ABSL_FLAG(bool, timeline, false,
          "Also print the Submit latencies second by second (when each was due): whether the "
          "tail is spread evenly or comes in bursts");
ABSL_FLAG(std::string, verify_acked_ids, "",
          "Instead of generating load: read ids (one a line) and check that the daemon has "
          "every one; exit 1 if any is missing");

namespace gpuprof::load {
namespace {

using Clock = std::chrono::steady_clock;
namespace v1 = ::gpuprof::v1;

std::string Quantiles(std::vector<double> ms) {
  if (ms.empty()) return "no samples";
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) {
    return ms[std::min(ms.size() - 1, static_cast<size_t>(q * ms.size()))];
  };
  return absl::StrFormat("n=%d p50=%.2f ms p99=%.2f ms max=%.2f ms", ms.size(), at(0.5), at(0.99),
                         ms.back());
}

struct Samples {
  std::mutex mutex;
  std::vector<double> ms;
  // Which second of the run each sample started in (when it was due), for the timeline.
  std::vector<int> second;
  void Add(double value, int started_second = 0) {
    std::lock_guard<std::mutex> lock(mutex);
    ms.push_back(value);
    second.push_back(started_second);
  }
  std::string Summary() {
    std::lock_guard<std::mutex> lock(mutex);
    return Quantiles(ms);
  }
  // One line per second of the run.
  std::string Timeline() {
    std::lock_guard<std::mutex> lock(mutex);
    std::map<int, std::vector<double>> by_second;
    for (size_t i = 0; i < ms.size(); ++i) by_second[second[i]].push_back(ms[i]);
    std::string lines;
    for (auto& [at, values] : by_second) {
      absl::StrAppend(&lines, absl::StrFormat("  second %3d: %s\n", at, Quantiles(values)));
    }
    return lines;
  }
};

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

v1::ExperimentRequest LoadRequest(int client) {
  v1::ExperimentRequest request;
  request.mutable_radix()->set_num_requests(100);
  request.set_user(absl::StrCat("load-", client % 20));
  request.set_description("load generator");
  return request;
}

// Submits and returns the id from the acknowledgement (the first, stored event); "" on error.
// `start` is when the submission was due (the acknowledgement latency counts from it).
std::string Submit(v1::Profiler::Stub& stub, int client, Samples& latency,
                   Clock::time_point run_start, Clock::time_point start = Clock::now()) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto stream = stub.Submit(&context, LoadRequest(client));
  v1::ExperimentEvent ack;
  if (!stream->Read(&ack)) {
    const grpc::Status status = stream->Finish();
    std::fprintf(stderr, "submit failed: %s\n", status.error_message().c_str());
    return "";
  }
  latency.Add(MsSince(start),
              static_cast<int>(std::chrono::duration<double>(start - run_start).count()));
  context.TryCancel();
  stream->Finish().IgnoreError();
  return ack.experiment_id();
}

void Cancel(v1::Profiler::Stub& stub, const std::string& id) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::CancelRequest request;
  request.set_experiment_id(id);
  v1::Experiment experiment;
  stub.Cancel(&context, request, &experiment).ok();
}

int64_t ProcCount(int pid, const std::string& field) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    absl::string_view view(line);
    if (!absl::ConsumePrefix(&view, field + ":")) continue;
    view = absl::StripAsciiWhitespace(view);
    absl::ConsumeSuffix(&view, " kB");
    int64_t value = 0;
    if (absl::SimpleAtoi(view, &value)) return value;
  }
  return -1;
}

int64_t OpenFds(int pid) {
  DIR* dir = opendir(absl::StrCat("/proc/", pid, "/fd").c_str());
  if (dir == nullptr) return -1;
  int64_t count = 0;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;
  }
  closedir(dir);
  return count;
}

std::string DaemonResources(int pid) {
  if (pid <= 0) return "not measured (no --daemon_pid)";
  return absl::StrFormat("RSS %d MiB, %d open fds", ProcCount(pid, "VmRSS") / 1024, OpenFds(pid));
}

int VerifyAckedIds(const std::string& target, const std::string& path);

int Run() {
  const std::string target = absl::GetFlag(FLAGS_target);
  if (target.empty()) {
    std::fprintf(stderr, "load_generator: --target is required\n");
    return 2;
  }
  if (const std::string path = absl::GetFlag(FLAGS_verify_acked_ids); !path.empty()) {
    return VerifyAckedIds(target, path);
  }
  const int clients = absl::GetFlag(FLAGS_clients);
  const int pid = absl::GetFlag(FLAGS_daemon_pid);
  std::vector<std::unique_ptr<v1::Profiler::Stub>> stubs;
  for (int i = 0; i < clients; ++i) {
    grpc::ChannelArguments arguments;
    // Separate connections, as separate users' CLIs would have.
    arguments.SetInt("load_generator_client", i);
    std::shared_ptr<grpc::Channel> channel =
        grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), arguments);
    // Connected before anything is timed, as a long-lived client's channel is: otherwise the
    // first second's latencies are mostly 200 connections being set up at once.
    if (absl::GetFlag(FLAGS_connect_first) &&
        !channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
      std::fprintf(stderr, "load_generator: client %d could not connect to %s\n", i,
                   target.c_str());
      return 1;
    }
    stubs.push_back(v1::Profiler::NewStub(channel));
  }

  // Prefill: a large store for List; cancelled right away so the queue stays short.
  const int64_t prefill = absl::GetFlag(FLAGS_prefill);
  if (prefill > 0) {
    std::atomic<int64_t> submitted = 0;
    Samples ignored;
    const auto start = Clock::now();
    std::vector<std::thread> threads;
    for (int i = 0; i < clients; ++i) {
      threads.emplace_back([&, i] {
        while (submitted.fetch_add(1) < prefill) {
          const std::string id = Submit(*stubs[i], i, ignored, start);
          if (!id.empty()) Cancel(*stubs[i], id);
        }
      });
    }
    for (auto& thread : threads) thread.join();
    std::printf("prefill: %lld experiments in %.1f s\n", static_cast<long long>(prefill),
                MsSince(start) / 1000);
  }

  std::printf("daemon at start: %s\n", DaemonResources(pid).c_str());
  Samples submit_latency, list_latency, watch_latency, cancel_latency, scrape_latency;
  std::atomic<int64_t> acknowledged = 0;
  std::mutex acked_mutex;
  std::vector<std::string> acked_ids;
  std::atomic<bool> done = false;
  const auto start = Clock::now();
  const auto end = start + absl::ToChronoNanoseconds(absl::GetFlag(FLAGS_duration));

  std::thread scraper([&] {
    const int port = absl::GetFlag(FLAGS_metrics_port);
    if (port == 0) return;
    while (!done.load()) {
      const auto begin = Clock::now();
      auto response = gpuprof::testing::HttpGet(port, "/metrics", absl::Seconds(5));
      if (response.ok() && response->status_code == 200) scrape_latency.Add(MsSince(begin));
      std::this_thread::sleep_until(begin + std::chrono::milliseconds(200));
    }
  });

  std::vector<std::thread> threads;
  const int watchers = std::min(absl::GetFlag(FLAGS_watchers), clients);
  const double rate = absl::GetFlag(FLAGS_rate);
  // Each client's pace when paced: clients / rate seconds between its submissions, the
  // clients staggered evenly over one interval.
  const auto interval = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(rate > 0 ? clients / rate : 0));
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      v1::Profiler::Stub& stub = *stubs[i];
      Clock::time_point due = start + interval * i / clients;
      for (int round = 0; Clock::now() < end; ++round) {
        if (rate > 0) {
          std::this_thread::sleep_until(due);
          if (due >= end) break;
        }
        const std::string id =
            Submit(stub, i, submit_latency, start, rate > 0 ? due : Clock::now());
        due += interval;
        if (id.empty()) {
          // The daemon may be gone (a kill -9 test): do not spin.
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          continue;
        }
        acknowledged.fetch_add(1);
        {
          std::lock_guard<std::mutex> lock(acked_mutex);
          acked_ids.push_back(id);
        }
        if (i < watchers) {
          // Watch it and cancel it: the CANCELLED event's delivery time is measured from the
          // daemon's timestamp on it (same host, same clock).
          grpc::ClientContext context;
          context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
          v1::WatchRequest watch;
          watch.set_experiment_id(id);
          auto stream = stub.Watch(&context, watch);
          const auto cancel_start = Clock::now();
          Cancel(stub, id);
          cancel_latency.Add(MsSince(cancel_start));
          v1::ExperimentEvent event;
          while (stream->Read(&event)) {
            if (event.has_state() && event.state().state() == v1::CANCELLED) {
              const int64_t sent_ns =
                  google::protobuf::util::TimeUtil::TimestampToNanoseconds(event.time());
              watch_latency.Add((absl::GetCurrentTimeNanos() - sent_ns) / 1e6);
              break;
            }
          }
          context.TryCancel();
          stream->Finish().IgnoreError();
        } else if (absl::GetFlag(FLAGS_cancel)) {
          const auto cancel_start = Clock::now();
          Cancel(stub, id);
          cancel_latency.Add(MsSince(cancel_start));
        }
        if (round % 4 == 0) {
          grpc::ClientContext context;
          context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
          v1::ListExperimentsRequest list;
          list.set_page_size(50);
          v1::ListExperimentsResponse page;
          const auto list_start = Clock::now();
          if (stub.ListExperiments(&context, list, &page).ok())
            list_latency.Add(MsSince(list_start));
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  const double seconds = MsSince(start) / 1000;
  done.store(true);
  scraper.join();

  std::printf("clients: %d for %.1f s, %s\n", clients, seconds,
              rate > 0 ? absl::StrFormat("paced at %.0f submits/s offered", rate).c_str()
                       : "closed loop (each client as fast as it can)");
  std::printf("durable submits: %lld (%.1f per second)\n",
              static_cast<long long>(acknowledged.load()), acknowledged.load() / seconds);
  std::printf("Submit ack latency: %s\n", submit_latency.Summary().c_str());
  if (absl::GetFlag(FLAGS_timeline)) std::printf("%s", submit_latency.Timeline().c_str());
  std::printf("Cancel latency: %s\n", cancel_latency.Summary().c_str());
  std::printf("Watch delivery latency: %s\n", watch_latency.Summary().c_str());
  std::printf("List (page of 50) latency: %s\n", list_latency.Summary().c_str());
  std::printf("metrics scrape latency: %s\n", scrape_latency.Summary().c_str());
  std::printf("daemon at end: %s\n", DaemonResources(pid).c_str());
  if (const std::string path = absl::GetFlag(FLAGS_acked_ids_out); !path.empty()) {
    std::ofstream out(path);
    for (const std::string& id : acked_ids) out << id << "\n";
    if (!out.good()) {
      std::fprintf(stderr, "load_generator: could not write %s\n", path.c_str());
      return 1;
    }
    std::printf("acknowledged ids: %zu written to %s\n", acked_ids.size(), path.c_str());
  }
  return 0;
}

// Checks that every id in `path` is stored: after a kill -9 mid-load and a restart, an
// acknowledged submission that is missing would be a lost acknowledgement.
int VerifyAckedIds(const std::string& target, const std::string& path) {
  std::ifstream in(path);
  if (!in.good()) {
    std::fprintf(stderr, "load_generator: cannot read --verify_acked_ids=%s\n", path.c_str());
    return 2;
  }
  auto stub =
      v1::Profiler::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  int64_t checked = 0, missing = 0;
  std::string id;
  while (std::getline(in, id)) {
    if (id.empty()) continue;
    ++checked;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    v1::GetExperimentRequest request;
    request.set_experiment_id(id);
    v1::Experiment experiment;
    const grpc::Status status = stub->GetExperiment(&context, request, &experiment);
    if (!status.ok()) {
      ++missing;
      std::fprintf(stderr, "missing: %s (%s)\n", id.c_str(), status.error_message().c_str());
    }
  }
  std::printf("acknowledged ids checked: %lld, missing: %lld\n", static_cast<long long>(checked),
              static_cast<long long>(missing));
  return missing == 0 && checked > 0 ? 0 : 1;
}

}  // namespace
}  // namespace gpuprof::load

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return gpuprof::load::Run();
}
