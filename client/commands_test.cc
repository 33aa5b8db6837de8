#include "client/commands.h"

#include "absl/strings/str_cat.h"
#include "common/version.h"
#include "common/write_health.h"

#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "client/token_hash.h"
#include "google/protobuf/text_format.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"

namespace gpuprof::client {
namespace {

using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

template <typename Message>
Message ParseText(const std::string& text) {
  Message message;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &message)) << text;
  return message;
}

// A Profiler that records what it was asked and answers from canned replies.
class FakeProfiler final : public v1::Profiler::Service {
 public:
  grpc::Status Submit(grpc::ServerContext*, const v1::ExperimentRequest* request,
                      grpc::ServerWriter<v1::ExperimentEvent>* writer) override {
    absl::MutexLock lock(&mutex_);
    submitted.push_back(*request);
    for (const v1::ExperimentEvent& event : events) writer->Write(event);
    return stream_status;
  }
  grpc::Status Watch(grpc::ServerContext*, const v1::WatchRequest* request,
                     grpc::ServerWriter<v1::ExperimentEvent>* writer) override {
    absl::MutexLock lock(&mutex_);
    watched.push_back(*request);
    for (const v1::ExperimentEvent& event : events) {
      if (event.seq() >= request->from_seq()) writer->Write(event);
    }
    return stream_status;
  }
  grpc::Status Cancel(grpc::ServerContext*, const v1::CancelRequest* request,
                      v1::Experiment* response) override {
    absl::MutexLock lock(&mutex_);
    cancelled.push_back(*request);
    response->set_id(request->experiment_id());
    response->set_state(v1::CANCELLED);
    response->set_reason(request->reason());
    return unary_status;
  }
  grpc::Status GetExperiment(grpc::ServerContext*, const v1::GetExperimentRequest* request,
                             v1::Experiment* response) override {
    absl::MutexLock lock(&mutex_);
    if (request->experiment_id() != experiment.id()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "no experiment " + request->experiment_id());
    }
    *response = experiment;
    return unary_status;
  }
  grpc::Status ListExperiments(grpc::ServerContext*, const v1::ListExperimentsRequest* request,
                               v1::ListExperimentsResponse* response) override {
    absl::MutexLock lock(&mutex_);
    listed.push_back(*request);
    const auto page = pages.find(request->page_token());
    if (page != pages.end()) *response = page->second;
    return unary_status;
  }
  grpc::Status ListGpus(grpc::ServerContext*, const v1::ListGpusRequest*,
                        v1::ListGpusResponse* response) override {
    absl::MutexLock lock(&mutex_);
    *response = gpus;
    return unary_status;
  }
  grpc::Status WhoAmI(grpc::ServerContext*, const v1::WhoAmIRequest*,
                      v1::CallerInfo* response) override {
    response->set_user("alice-as-authenticated");
    response->set_authenticated_by("unix peer credentials (uid 1000)");
    return grpc::Status::OK;
  }

  // Set before the RPCs run; read after they return.
  std::vector<v1::ExperimentEvent> events;
  grpc::Status stream_status;
  grpc::Status unary_status;
  v1::Experiment experiment;
  std::map<std::string, v1::ListExperimentsResponse> pages;  // by page token
  v1::ListGpusResponse gpus;
  std::vector<v1::ExperimentRequest> submitted;
  std::vector<v1::WatchRequest> watched;
  std::vector<v1::CancelRequest> cancelled;
  std::vector<v1::ListExperimentsRequest> listed;

 private:
  absl::Mutex mutex_;
};

class FakeHealth final : public grpc::health::v1::Health::Service {
 public:
  grpc::Status Check(grpc::ServerContext*, const HealthCheckRequest* request,
                     HealthCheckResponse* response) override {
    services.push_back(request->service());
    if (request->service() == kWritesHealthService) {
      if (!writes_known) return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service");
      response->set_status(writes);
      return grpc::Status::OK;
    }
    response->set_status(status);
    return grpc::Status::OK;
  }
  HealthCheckResponse::ServingStatus status = HealthCheckResponse::SERVING;
  HealthCheckResponse::ServingStatus writes = HealthCheckResponse::SERVING;
  bool writes_known = true;  // false: a daemon older than the writes service
  std::vector<std::string> services;
};

class CommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.RegisterService(&profiler_);
    builder.RegisterService(&health_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    env_.out = &out_;
    env_.err = &err_;
    env_.local_user = "alice";
    env_.now = [] { return absl::FromUnixSeconds(1714564800); };
    env_.connect = [this](const ConnectionOptions& options) {
      const std::string& target = options.target;
      targets_.push_back(target);
      auto channel = server_->InProcessChannel(grpc::ChannelArguments());
      return DaemonStubs{v1::Profiler::NewStub(channel),
                         grpc::health::v1::Health::NewStub(channel)};
    };
  }
  void TearDown() override { server_->Shutdown(); }

  int Run(const std::vector<std::string>& args) {
    out_.str("");
    err_.str("");
    return RunGpuprof(args, env_);
  }

  static v1::ExperimentEvent Event(const std::string& text) {
    return ParseText<v1::ExperimentEvent>(text);
  }

  FakeProfiler profiler_;
  FakeHealth health_;
  std::unique_ptr<grpc::Server> server_;
  ClientEnvironment env_;
  std::ostringstream out_;
  std::ostringstream err_;
  std::vector<std::string> targets_;
};

TEST_F(CommandsTest, HelpVersionAndUsageErrors) {
  EXPECT_EQ(Run({"help"}), kExitOk);
  EXPECT_THAT(out_.str(), StartsWith(absl::StrCat("gpuprof ", GpuprofVersion(), ": ")));
  EXPECT_THAT(out_.str(), HasSubstr("exit codes:"));
  EXPECT_EQ(Run({"--help"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("commands:\n  gpus"));
  EXPECT_EQ(Run({"--version"}), kExitOk);
  EXPECT_EQ(out_.str(), absl::StrCat("gpuprof ", GpuprofVersion(), "\n"));
  EXPECT_EQ(Run({}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("usage: gpuprof"));
  EXPECT_EQ(Run({"frobnicate"}), kExitUsage);
  EXPECT_EQ(err_.str(), "error: unknown command \"frobnicate\"; run gpuprof help\n");
  EXPECT_EQ(Run({"--verbose", "gpus"}), kExitUsage);
  EXPECT_EQ(Run({"list", "--help"}), kExitOk);
  EXPECT_THAT(out_.str(), StartsWith("usage: gpuprof list [--user U | --mine]"));
  EXPECT_EQ(Run({"help", "watch"}), kExitOk);
  EXPECT_THAT(out_.str(), StartsWith("usage: gpuprof watch ID"));
  EXPECT_EQ(Run({"get"}), kExitUsage);
  EXPECT_THAT(err_.str(), StartsWith("error: get needs ID: gpuprof get ID [--json | --command | --source]\n"));
  EXPECT_EQ(Run({"get", "a", "b"}), kExitUsage);
  EXPECT_THAT(err_.str(), StartsWith("error: unexpected argument \"b\""));
  EXPECT_TRUE(targets_.empty()) << "help and usage errors must not connect";
}

TEST_F(CommandsTest, HelpForEveryCommandAndSuggestionsForTypos) {
  EXPECT_EQ(Run({"lsit"}), kExitUsage);
  EXPECT_EQ(err_.str(), "error: unknown command \"lsit\" (did you mean list?); run gpuprof help\n");
  EXPECT_EQ(Run({"help", "swep"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("(did you mean sweep?)"));
  EXPECT_EQ(Run({"sweep", "lsit"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("(did you mean list?)"));
  EXPECT_EQ(Run({"submit", "atention"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("unknown workload \"atention\" (did you mean attention?)"));
  for (const char* command : {"sweep", "compare", "baseline", "completion", "cancel", "audit"}) {
    EXPECT_EQ(Run({"help", command}), kExitOk) << command << ": " << err_.str();
    EXPECT_THAT(out_.str(), HasSubstr("usage: gpuprof")) << command;
  }
  EXPECT_EQ(Run({"help", "sweep", "get"}), kExitOk);
  EXPECT_THAT(out_.str(), StartsWith("usage: gpuprof sweep get ID"));
  EXPECT_THAT(out_.str(), HasSubstr("--format"));
  EXPECT_EQ(Run({"help", "sweep", "attention"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("--dtype fp16|bf16"));
  // The global help names --user once, with what it does.
  EXPECT_EQ(Run({"help"}), kExitOk);
  const std::string help = out_.str();
  EXPECT_EQ(help.find("\n  --user NAME"), help.rfind("\n  --user NAME"));
  EXPECT_NE(help.find("\n  --user NAME"), std::string::npos);
  EXPECT_TRUE(targets_.empty()) << "help must not connect";
}

TEST_F(CommandsTest, CompletionScriptsAreLocal) {
  EXPECT_EQ(Run({"completion", "bash"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("complete -F _gpuprof gpuprof"));
  EXPECT_THAT(out_.str(), HasSubstr("\"submit\") echo 'index store attention"));
  EXPECT_EQ(Run({"completion", "zsh"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("compdef _gpuprof gpuprof"));
  EXPECT_EQ(Run({"completion", "fish"}), kExitUsage);
  EXPECT_TRUE(targets_.empty()) << "completion must not connect";
}

TEST_F(CommandsTest, SubmitRefusesAZeroTheDaemonWouldReplace) {
  EXPECT_EQ(Run({"submit", "radix", "--requests", "0"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("--requests 0: radix.num_requests of 0 means unset"));
  // A sweep's axis value and its base alike.
  EXPECT_EQ(Run({"sweep", "radix", "--requests", "0,100"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("--requests 0: radix.num_requests of 0 means unset"));
  EXPECT_EQ(Run({"sweep", "radix", "--users", "2,4", "--requests", "0"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("radix.num_requests of 0 means unset"));
  EXPECT_TRUE(targets_.empty()) << "a refused request must not connect";
}

TEST_F(CommandsTest, SubmitHelpIsGeneratedFromTheSpec) {
  EXPECT_EQ(Run({"submit", "attention", "--help"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("attention flags (fields of gpuprof.v1.AttentionSpec"));
  EXPECT_THAT(out_.str(), HasSubstr("--phase prefill|decode"));
  EXPECT_THAT(out_.str(), HasSubstr("--num-qo-heads INT"));
  EXPECT_EQ(Run({"submit", "-h"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("workloads: index, store, attention, collective, radix"));
  EXPECT_EQ(Run({"help", "submit", "radix"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("--history-growth-probability NUM"));
}

TEST_F(CommandsTest, SubmitPrintsTheIdAndDetaches) {
  profiler_.events = {
      Event("experiment_id: 'exp-000001' seq: 1 state { state: QUEUED queue_position: 1 }"),
      Event("experiment_id: 'exp-000001' seq: 2 state { state: RUNNING }"),
  };
  EXPECT_EQ(Run({"submit", "index", "--tokens", "4K", "--dtype", "bf16", "--gpus", "0"}), kExitOk);
  EXPECT_EQ(out_.str(), "submitted exp-000001: queued (position 1)\n");
  ASSERT_EQ(profiler_.submitted.size(), 1u);
  const v1::ExperimentRequest& request = profiler_.submitted[0];
  EXPECT_EQ(request.index().num_tokens(), 4000);
  EXPECT_EQ(request.index().dtype(), v1::DATA_TYPE_BF16);
  EXPECT_EQ(request.gpus().gpu_ids(0), 0);
  // Without --user the daemon decides who is asking.
  EXPECT_EQ(request.user(), "");
  EXPECT_EQ(targets_, std::vector<std::string>{"127.0.0.1:7070"});
}

TEST_F(CommandsTest, SubmitJsonPrintsTheFirstEvent) {
  profiler_.events = {Event("experiment_id: 'exp-000002' seq: 1 state { state: QUEUED }")};
  EXPECT_EQ(Run({"submit", "radix", "--json"}), kExitOk);
  EXPECT_EQ(out_.str(),
            "{\"experimentId\":\"exp-000002\",\"seq\":\"1\",\"state\":{\"state\":\"QUEUED\"}}\n");
}

TEST_F(CommandsTest, TargetAndUserPrecedence) {
  profiler_.events = {Event("experiment_id: 'e' state { state: QUEUED }")};
  env_.target_from_env = "unix:/run/gpuprof.sock";
  EXPECT_EQ(Run({"submit", "radix"}), kExitOk);
  EXPECT_EQ(Run({"--target", "host:1", "--user", "bob", "submit", "radix"}), kExitOk);
  EXPECT_EQ(Run({"--target=host:1", "submit", "radix", "--target", "host:2", "--user", "carol"}),
            kExitOk);
  EXPECT_EQ(targets_, (std::vector<std::string>{"unix:/run/gpuprof.sock", "host:1", "host:2"}));
  ASSERT_EQ(profiler_.submitted.size(), 3u);
  EXPECT_EQ(profiler_.submitted[0].user(), "");
  EXPECT_EQ(profiler_.submitted[1].user(), "bob");
  EXPECT_EQ(profiler_.submitted[2].user(), "carol");
}

TEST_F(CommandsTest, SubmitBadFlagsExitTwoWithoutConnecting) {
  EXPECT_EQ(Run({"submit", "index", "--dtype", "bf61"}), kExitUsage);
  EXPECT_EQ(err_.str(),
            "error: --dtype: \"bf61\" is not one of fp32, fp16, bf16, fp8-e4m3, int8, int32, fp8-e5m2\n"
            "(see gpuprof submit index --help)\n");
  EXPECT_EQ(Run({"submit", "gemm"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("unknown workload \"gemm\""));
  EXPECT_EQ(Run({"submit", "--tokens", "1"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("the workload comes first"));
  EXPECT_EQ(Run({"submit"}), kExitUsage);
  EXPECT_EQ(Run({"submit", "index", "--seed"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("--seed needs a value"));
  EXPECT_EQ(Run({"submit", "index", "stray"}), kExitUsage);
  EXPECT_TRUE(targets_.empty());
}

TEST_F(CommandsTest, DaemonRejectionIsPrintedAsIs) {
  profiler_.stream_status =
      grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "index.num_tokens must be > 0, got -1");
  EXPECT_EQ(Run({"submit", "index", "--tokens", "-1"}), kExitUsage);
  EXPECT_EQ(err_.str(), "error: INVALID_ARGUMENT: index.num_tokens must be > 0, got -1\n");
  EXPECT_EQ(out_.str(), "");
}

TEST_F(CommandsTest, FollowRendersUntilTheEndAndExitsByState) {
  profiler_.events = {
      Event("experiment_id: 'exp-3' seq: 1 state { state: QUEUED queue_position: 1 }"),
      Event("experiment_id: 'exp-3' seq: 2 state { state: RUNNING gpu_ids: 0 }"),
      Event("experiment_id: 'exp-3' seq: 3 progress { phase: PHASE_TIMED done: 5 total: 10 }"),
      Event("experiment_id: 'exp-3' seq: 4 result { collective { ranks: 1 correct: true } }"),
      Event("experiment_id: 'exp-3' seq: 5 state { state: FINISHED }"),
  };
  EXPECT_EQ(Run({"submit", "collective", "--follow"}), kExitOk);
  EXPECT_THAT(out_.str(), StartsWith("exp-3 queued (position 1)\nexp-3 running on GPU 0\n"));
  EXPECT_THAT(out_.str(), HasSubstr("collective:  1 ranks"));
  EXPECT_THAT(out_.str(), HasSubstr("exp-3 finished"));

  profiler_.events.back() =
      Event("experiment_id: 'exp-3' seq: 5 state { state: FAILED reason: 'boom' }");
  EXPECT_EQ(Run({"watch", "exp-3"}), kExitNotFinished);
  EXPECT_THAT(out_.str(), HasSubstr("exp-3 failed: boom\n"));
}

TEST_F(CommandsTest, AKernelThatDidNotCompileExitsTwoWithTheCompilersMessages) {
  profiler_.events = {
      Event("experiment_id: 'exp-8' seq: 1 state { state: RUNNING gpu_ids: 0 }"),
      Event("experiment_id: 'exp-8' seq: 2 result { custom_kernel { compile_log: "
            "'g.cu(3): error: identifier \"x\" is undefined\\ng.cu(7): warning: unused\\n' } }"),
      Event("experiment_id: 'exp-8' seq: 3 state { state: FAILED reason: 'the kernel did not "
            "compile' }"),
  };
  EXPECT_EQ(Run({"watch", "exp-8"}), kExitUsage);
  EXPECT_THAT(out_.str(), HasSubstr("exp-8 failed: the kernel did not compile:\n"
                                    "g.cu(3): error: identifier \"x\" is undefined\n"
                                    "g.cu(7): warning: unused\n"));
  // Known by the reason alone, the log in it.
  profiler_.events = {
      Event("experiment_id: 'exp-8' seq: 1 state { state: FAILED reason: 'compile error:\\n"
            "g.cu(3): error: expected a \";\"' }"),
  };
  EXPECT_EQ(Run({"watch", "exp-8", "--json"}), kExitUsage);
  EXPECT_EQ(Run({"watch", "exp-8"}), kExitUsage);
  EXPECT_THAT(out_.str(), HasSubstr("compile error:\ng.cu(3): error: expected a \";\"\n"));
  // A kernel that compiled and then failed is an ordinary failure.
  profiler_.events = {
      Event("experiment_id: 'exp-8' seq: 1 result { custom_kernel { compile_log: 'warning' "
            "registers_per_thread: 30 } }"),
      Event("experiment_id: 'exp-8' seq: 2 state { state: FAILED reason: 'illegal address' }"),
  };
  EXPECT_EQ(Run({"watch", "exp-8"}), kExitNotFinished);
}

TEST_F(CommandsTest, SubmitSendsTheKernelFileAndRefusesBadOnesWithoutConnecting) {
  const std::string dir = std::getenv("TEST_TMPDIR");
  const std::string source = "extern \"C\" __global__ void g(const gpuprof::IndexParams p) {}\n";
  std::ofstream(dir + "/g.cu") << source;
  profiler_.events = {Event("experiment_id: 'exp-9' seq: 1 state { state: QUEUED }")};
  EXPECT_EQ(Run({"submit", "index", "--kernel-file", dir + "/g.cu", "--mode", "test"}), kExitOk)
      << err_.str();
  ASSERT_EQ(profiler_.submitted.size(), 1u);
  EXPECT_EQ(profiler_.submitted[0].custom_kernel().source(), source);
  EXPECT_EQ(profiler_.submitted[0].custom_kernel().file_name(), "g.cu");
  EXPECT_EQ(profiler_.submitted[0].custom_kernel().kernel_name(), "g");
  EXPECT_EQ(profiler_.submitted[0].custom_kernel().mode(), v1::CustomKernel::MODE_TEST);
  targets_.clear();
  EXPECT_EQ(Run({"submit", "radix", "--kernel-file", dir + "/g.cu"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("radix takes no custom kernel"));
  EXPECT_EQ(Run({"submit", "index", "--kernel-file", dir + "/none.cu"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("none.cu: No such file or directory"));
  EXPECT_TRUE(targets_.empty());
  EXPECT_EQ(Run({"submit", "index", "--help"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("custom kernel flags"));
  EXPECT_THAT(out_.str(), HasSubstr("--block-threads INT "));
  EXPECT_THAT(out_.str(), HasSubstr("Threads per block: a multiple of 32 from 32 to 1024."));
  EXPECT_EQ(Run({"submit", "radix", "--help"}), kExitOk);
  EXPECT_THAT(out_.str(), Not(HasSubstr("--kernel-file")));
}

TEST_F(CommandsTest, GetSourcePrintsTheBytesAndSassSaysWhyThereIsNone) {
  const std::string source("extern \"C\" __global__ void g() {}\n\x1b[31m\0tail", 40);
  profiler_.experiment.set_id("exp-10");
  profiler_.experiment.set_state(v1::FINISHED);
  profiler_.experiment.mutable_request()->mutable_index();
  profiler_.experiment.mutable_request()->mutable_custom_kernel()->set_source(source);
  profiler_.experiment.mutable_request()->mutable_custom_kernel()->set_file_name("g.cu");
  EXPECT_EQ(Run({"get", "exp-10", "--source"}), kExitOk);
  EXPECT_EQ(out_.str(), source);
  EXPECT_EQ(Run({"get", "exp-10"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("kernel:\n  name:"));
  EXPECT_EQ(Run({"get", "exp-10", "--command"}), kExitOk);
  EXPECT_EQ(out_.str(), "gpuprof submit index --kernel-file g.cu\n");
  EXPECT_EQ(Run({"sass", "exp-10"}), kExitOtherError);
  EXPECT_THAT(err_.str(), HasSubstr("exp-10 has no result yet"));
  profiler_.experiment.mutable_result()->add_sass()->set_text("EXIT ;");
  EXPECT_EQ(Run({"sass", "exp-10"}), kExitOk);
  EXPECT_EQ(out_.str(), "OFFSET  INSTRUCTION\n0000    EXIT ;\n");
  EXPECT_EQ(Run({"sass", "exp-10", "--json"}), kExitOk);
  EXPECT_EQ(out_.str(), "{\"text\":\"EXIT ;\"}\n");
  profiler_.experiment.mutable_request()->clear_custom_kernel();
  EXPECT_EQ(Run({"get", "exp-10", "--source"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("exp-10 ran our kernel"));
}

TEST_F(CommandsTest, BoardPagesTheListingAndRanksTheShape) {
  const auto run = [](const std::string& id, int hidden, double gbps) {
    return absl::StrCat("experiments { id: '", id, "' user: 'ana' state: FINISHED ",
                        "request { index { hidden_dim: ", hidden, " } } result { measurement { ",
                        "bandwidth_gbps: ", gbps, " kernel_time { samples: 9 relative_noise: "
                        "0.01 } } verification { checked: true passed: true } } } ");
  };
  profiler_.pages[""] = ParseText<v1::ListExperimentsResponse>(
      absl::StrCat(run("exp-1", 7168, 2000), run("exp-2", 4096, 3000), "next_page_token: 'p2'"));
  profiler_.pages["p2"] = ParseText<v1::ListExperimentsResponse>(run("exp-3", 7168, 2500));
  EXPECT_EQ(Run({"board", "index", "--hidden", "7168"}), kExitOk) << err_.str();
  ASSERT_EQ(profiler_.listed.size(), 2u);
  EXPECT_EQ(profiler_.listed[0].workload(), v1::WORKLOAD_INDEX);
  EXPECT_EQ(profiler_.listed[1].page_token(), "p2");
  EXPECT_THAT(out_.str(), HasSubstr("   1  2500 GB/s ±1.0%   1.000x  ours    ana   exp-3  -    -\n"));
  EXPECT_THAT(out_.str(), HasSubstr("   2  2000 GB/s ±1.0%   0.800x  ours    ana   exp-1  -    -\n"));
  EXPECT_THAT(out_.str(), Not(HasSubstr("exp-2")));
  EXPECT_EQ(Run({"board", "index", "--hidden", "7168", "-q"}), kExitOk);
  EXPECT_EQ(out_.str(), "exp-3\nexp-1\n");
  EXPECT_EQ(Run({"board", "index", "--hidden", "1", "--json"}), kExitOk);
  EXPECT_EQ(out_.str(), "");
  EXPECT_EQ(Run({"board", "index", "--seed", "1"}), kExitUsage);
}

TEST_F(CommandsTest, WatchPassesFromSeqAndReportsAStreamThatEndsEarly) {
  profiler_.events = {
      Event("experiment_id: 'exp-4' seq: 1 state { state: QUEUED }"),
      Event("experiment_id: 'exp-4' seq: 2 state { state: RUNNING }"),
  };
  EXPECT_EQ(Run({"watch", "exp-4", "--from-seq", "2"}), kExitNotFinished);
  ASSERT_EQ(profiler_.watched.size(), 1u);
  EXPECT_EQ(profiler_.watched[0].experiment_id(), "exp-4");
  EXPECT_EQ(profiler_.watched[0].from_seq(), 2);
  EXPECT_EQ(out_.str(), "exp-4 running\n");
  EXPECT_EQ(err_.str(),
            "error: the event stream ended before the experiment did; resume with: gpuprof "
            "watch exp-4 --from-seq 3\n");

  profiler_.stream_status = grpc::Status(grpc::StatusCode::NOT_FOUND, "no experiment exp-9");
  profiler_.events.clear();
  EXPECT_EQ(Run({"watch", "exp-9"}), kExitUsage);
  EXPECT_EQ(err_.str(), "error: NOT_FOUND: no experiment exp-9\n");
  EXPECT_EQ(Run({"watch", "exp-9", "--from-seq", "x"}), kExitUsage);
}

TEST_F(CommandsTest, WatchJsonIsNdjson) {
  profiler_.events = {
      Event("experiment_id: 'exp-5' seq: 1 state { state: RUNNING }"),
      Event("experiment_id: 'exp-5' seq: 2 state { state: FINISHED }"),
  };
  EXPECT_EQ(Run({"watch", "exp-5", "--json"}), kExitOk);
  EXPECT_EQ(out_.str(),
            "{\"experimentId\":\"exp-5\",\"seq\":\"1\",\"state\":{\"state\":\"RUNNING\"}}\n"
            "{\"experimentId\":\"exp-5\",\"seq\":\"2\",\"state\":{\"state\":\"FINISHED\"}}\n");
}

TEST_F(CommandsTest, ListBuildsTheFilterAndFollowsPages) {
  profiler_.pages[""] = ParseText<v1::ListExperimentsResponse>(
      "experiments { id: 'exp-2' user: 'alice' workload: WORKLOAD_INDEX state: RUNNING } "
      "next_page_token: 'p2'");
  profiler_.pages["p2"] = ParseText<v1::ListExperimentsResponse>(
      "experiments { id: 'exp-1' user: 'alice' workload: WORKLOAD_RADIX state: FINISHED }");

  EXPECT_EQ(Run({"list", "--mine", "--state", "running,finished", "--state", "FAILED", "--workload",
                 "index", "--limit", "1"}),
            kExitOk);
  ASSERT_EQ(profiler_.listed.size(), 1u);
  const v1::ListExperimentsRequest& request = profiler_.listed[0];
  // --mine is whoever the daemon authenticates.
  EXPECT_EQ(request.user(), "alice-as-authenticated");
  ASSERT_EQ(request.states_size(), 3);
  EXPECT_EQ(request.states(0), v1::RUNNING);
  EXPECT_EQ(request.states(2), v1::FAILED);
  EXPECT_EQ(request.workload(), v1::WORKLOAD_INDEX);
  EXPECT_EQ(request.page_size(), 1);
  EXPECT_THAT(out_.str(), StartsWith("ID     USER   WORKLOAD  STATE"));
  // The hint goes to stderr: stdout holds the listing alone.
  EXPECT_THAT(err_.str(), HasSubstr("more: add --page-token p2 (or --all)\n"));
  EXPECT_THAT(out_.str(), Not(HasSubstr("more:")));
  EXPECT_THAT(out_.str(), Not(HasSubstr("exp-1")));

  EXPECT_EQ(Run({"list", "--all"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("exp-2"));
  EXPECT_THAT(out_.str(), HasSubstr("exp-1"));
  EXPECT_THAT(out_.str(), Not(HasSubstr("more:")));

  // NDJSON: one Experiment per line, not one wrapper object; --json also before the command.
  for (const auto& args : {std::vector<std::string>{"list", "--all", "--json"},
                           std::vector<std::string>{"--json", "list", "--all"}}) {
    EXPECT_EQ(Run(args), kExitOk);
    EXPECT_EQ(out_.str(),
              "{\"id\":\"exp-2\",\"state\":\"RUNNING\",\"workload\":\"WORKLOAD_INDEX\","
              "\"user\":\"alice\"}\n"
              "{\"id\":\"exp-1\",\"state\":\"FINISHED\",\"workload\":\"WORKLOAD_RADIX\","
              "\"user\":\"alice\"}\n");
  }
  EXPECT_EQ(Run({"list", "--all", "-q"}), kExitOk);
  EXPECT_EQ(out_.str(), "exp-2\nexp-1\n");
  EXPECT_EQ(Run({"-q", "list", "--all"}), kExitOk);
  EXPECT_EQ(out_.str(), "exp-2\nexp-1\n");
  EXPECT_EQ(Run({"list", "--all", "--no-headers"}), kExitOk);
  EXPECT_THAT(out_.str(), StartsWith("exp-2  alice"));
  EXPECT_EQ(Run({"list", "--page-token", "p2", "--no-headers", "--json"}), kExitUsage);

  EXPECT_EQ(Run({"list", "--page-token", "p2", "--user", "bob"}), kExitOk);
  EXPECT_EQ(profiler_.listed.back().page_token(), "p2");
  EXPECT_EQ(profiler_.listed.back().user(), "bob");

  EXPECT_EQ(Run({"list", "--state", "done"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("--state: \"done\" is not one of queued, running, finished, "
                                    "failed, cancelled, timed-out, interrupted"));
  EXPECT_EQ(Run({"list", "--user", "bob", "--mine"}), kExitUsage);
}

TEST_F(CommandsTest, ListWithNothingSaysSo) {
  EXPECT_EQ(Run({"list"}), kExitOk);
  EXPECT_EQ(out_.str(), "no experiments\n");
}

TEST_F(CommandsTest, GetRendersOrNotFound) {
  profiler_.experiment = ParseText<v1::Experiment>(
      "id: 'exp-7' workload: WORKLOAD_INDEX state: FINISHED request { index { num_tokens: 8 } }");
  EXPECT_EQ(Run({"get", "exp-7"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("experiment:  exp-7\n"));
  EXPECT_THAT(out_.str(), HasSubstr("request:     index { num_tokens: 8 }\n"));
  EXPECT_EQ(Run({"get", "exp-7", "--json"}), kExitOk);
  EXPECT_THAT(out_.str(), StartsWith("{\"id\":\"exp-7\""));
  EXPECT_EQ(Run({"get", "exp-8"}), kExitUsage);
  EXPECT_EQ(err_.str(), "error: NOT_FOUND: no experiment exp-8\n");
}

TEST_F(CommandsTest, GetCommandPrintsTheSubmitLineThatRunsItAgain) {
  profiler_.experiment = ParseText<v1::Experiment>(
      "id: 'exp-7' workload: WORKLOAD_INDEX state: FINISHED user: 'alice' "
      "request { index { num_tokens: 8 } priority: 2 user: 'alice' "
      "          labels { key: 'why' value: 'a b' } } "
      "result { provenance { request { index { num_tokens: 8 vocab_size: 128000 } } } }");
  EXPECT_EQ(Run({"get", "exp-7", "--command"}), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(),
            "gpuprof submit index --num-tokens 8 --vocab-size 128000 --priority 2 "
            "--label 'why=a b'\n");
  EXPECT_EQ(Run({"get", "exp-7", "--command", "--json"}), kExitUsage);
}

TEST_F(CommandsTest, CancelPrintsTheNewState) {
  EXPECT_EQ(Run({"cancel", "exp-7"}), kExitOk);
  // Without --reason the daemon records who cancelled it, as it authenticated them.
  EXPECT_EQ(out_.str(), "exp-7: cancelled\n");
  EXPECT_EQ(profiler_.cancelled.back().reason(), "");
  EXPECT_EQ(Run({"cancel", "exp-7", "--reason", "wrong size"}), kExitOk);
  EXPECT_EQ(profiler_.cancelled.back().reason(), "wrong size");
  profiler_.unary_status = grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "already done");
  EXPECT_EQ(Run({"cancel", "exp-7"}), kExitUsage);
  EXPECT_EQ(err_.str(), "error: FAILED_PRECONDITION: already done\n");
}

TEST_F(CommandsTest, CancelTakesSeveralIds) {
  EXPECT_EQ(Run({"cancel", "exp-7", "exp-8", "exp-9", "--reason", "wrong size"}), kExitOk);
  EXPECT_EQ(out_.str(),
            "exp-7: cancelled (wrong size)\nexp-8: cancelled (wrong size)\n"
            "exp-9: cancelled (wrong size)\n");
  ASSERT_EQ(profiler_.cancelled.size(), 3u);
  EXPECT_EQ(profiler_.cancelled[1].experiment_id(), "exp-8");
  EXPECT_EQ(Run({"cancel"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("cancel needs ID..."));
  // Each one is tried; the exit code is the first failure's.
  profiler_.unary_status = grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "already done");
  EXPECT_EQ(Run({"cancel", "exp-1", "exp-2"}), kExitUsage);
  EXPECT_EQ(profiler_.cancelled.size(), 5u);
}

TEST_F(CommandsTest, GpusRendersTheResponse) {
  profiler_.gpus = ParseText<v1::ListGpusResponse>(
      "host { hostname: 'box' } probe_error: 'no driver' supported_workloads: 'radix'");
  EXPECT_EQ(Run({"gpus"}), kExitOk);
  EXPECT_EQ(out_.str(), "host box: \n\nno GPUs: no driver\n\nworkloads:  radix\n");
  EXPECT_EQ(Run({"gpus", "--json"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("\"probeError\":\"no driver\""));
  profiler_.unary_status = grpc::Status(grpc::StatusCode::INTERNAL, "probe crashed");
  EXPECT_EQ(Run({"gpus"}), kExitOtherError);
}

TEST_F(CommandsTest, HealthChecksTheWholeServer) {
  EXPECT_EQ(Run({"health"}), kExitOk);
  EXPECT_EQ(out_.str(), "SERVING\n");
  EXPECT_THAT(health_.services, ElementsAre("", kWritesHealthService));
  health_.status = HealthCheckResponse::NOT_SERVING;
  EXPECT_EQ(Run({"health"}), kExitNotFinished);
  EXPECT_EQ(out_.str(), "NOT_SERVING\n");
}

TEST_F(CommandsTest, HealthSaysWhenOnlyReadsAreServed) {
  health_.writes = HealthCheckResponse::NOT_SERVING;
  EXPECT_EQ(Run({"health"}), kExitNotFinished);
  EXPECT_THAT(out_.str(), StartsWith("SERVING reads only: writes NOT_SERVING (the disk holding "
                                     "gpuprofd's database is full; free space there"));
  // A daemon that does not know the writes service is taken as writing.
  health_.writes_known = false;
  EXPECT_EQ(Run({"health"}), kExitOk);
  EXPECT_EQ(out_.str(), "SERVING\n");
}

TEST_F(CommandsTest, UnreachableDaemonExitsThreeWithAHint) {
  env_.connect = [](const ConnectionOptions& options) {
    const std::string& target = options.target;
    auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
    return DaemonStubs{v1::Profiler::NewStub(channel), grpc::health::v1::Health::NewStub(channel)};
  };
  const std::string target = "unix:/nonexistent/gpuprof-test.sock";
  EXPECT_EQ(Run({"--target", target, "health"}), kExitUnavailable);
  EXPECT_THAT(err_.str(), StartsWith("error: UNAVAILABLE: cannot reach gpuprofd at " + target));
  EXPECT_THAT(err_.str(), HasSubstr("is it running? set --target or GPUPROF_TARGET\n"));
  EXPECT_EQ(Run({"submit", "radix", "--follow", "--target", target}), kExitUnavailable);
}

TEST_F(CommandsTest, TokenHashPrintsTheHashAndPolicyEntryWithoutConnecting) {
  const std::string dir = ::testing::TempDir();
  const std::string file = dir + "/commands_test_token";
  std::ofstream(file) << "s3cret\n";
  // The hash of the token as sent: `printf %s s3cret | sha256sum`.
  const std::string hash = Sha256Hex("s3cret");
  EXPECT_EQ(Run({"token-hash", file}), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), hash + "\n");
  EXPECT_EQ(Run({"token-hash", file, "--user-name", "ci"}), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), absl::StrCat(hash, "\ntokens { user: \"ci\" sha256: \"", hash, "\" }\n"));

  std::istringstream piped("  s3cret\n");
  env_.in = &piped;
  EXPECT_EQ(Run({"token-hash", "-"}), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), hash + "\n");
  env_.token_from_env = "s3cret";
  EXPECT_EQ(Run({"token-hash"}), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), hash + "\n");

  // A token the CLI could never send is refused, without echoing it.
  env_.token_from_env = "s3cret\nmore";
  EXPECT_EQ(Run({"token-hash"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("$GPUPROF_TOKEN: U+000A (newline) at byte 6 cannot be sent"));
  EXPECT_THAT(err_.str(), Not(HasSubstr("s3cret")));
  EXPECT_EQ(Run({"token-hash", dir + "/no-such-file"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("cannot read"));
  EXPECT_EQ(Run({"help", "token-hash"}), kExitOk);
  EXPECT_THAT(out_.str(), StartsWith("usage: gpuprof token-hash [FILE | -] [--user-name NAME]"));
  EXPECT_TRUE(targets_.empty()) << "token-hash must not connect";
}

TEST_F(CommandsTest, TokenHashGeneratesAPrivateTokenFile) {
  const std::string file = ::testing::TempDir() + "/commands_test_generated";
  std::remove(file.c_str());
  EXPECT_EQ(Run({"token-hash", "--generate", file}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("--generate needs --user-name NAME"));
  EXPECT_EQ(Run({"token-hash", "--generate", file, "--user-name", "bad name"}), kExitUsage);
  std::ifstream not_written(file);
  EXPECT_FALSE(not_written.good()) << "a refused --generate must leave no file";

  EXPECT_EQ(Run({"token-hash", "--generate", file, "--user-name", "ci"}), kExitOk) << err_.str();
  struct stat info {};
  ASSERT_EQ(stat(file.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  std::ifstream written(file);
  std::string token;
  std::getline(written, token);
  EXPECT_EQ(token.size(), 43u);
  const std::string hash = Sha256Hex(token);
  EXPECT_EQ(out_.str(), absl::StrCat(hash, "\ntokens { user: \"ci\" sha256: \"", hash, "\" }\n"));
  EXPECT_THAT(out_.str(), Not(HasSubstr(token)));
  // Hashing the file gives the same line: the token as the CLI will send it.
  EXPECT_EQ(Run({"token-hash", file}), kExitOk);
  EXPECT_EQ(out_.str(), hash + "\n");
  EXPECT_EQ(Run({"token-hash", "--generate", file, "--user-name", "ci"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("already exists"));
  EXPECT_TRUE(targets_.empty()) << "token-hash must not connect";
}

// gRPC aborts the process (exit 134) on a header value it cannot send: the user and the token
// are checked before any connection, exit 2.
TEST_F(CommandsTest, HeaderValuesGrpcCannotSendAreRefusedBeforeConnecting) {
  EXPECT_EQ(Run({"--user", "a\nb", "whoami"}), kExitUsage);
  EXPECT_EQ(err_.str(),
            "error: --user \"a\\nb\": U+000A (newline) at byte 1 cannot be sent; it travels in a "
            "gRPC header, which carries printable ASCII only (0x20-0x7E)\n");
  EXPECT_EQ(Run({"--user", "x\x1b[2J", "submit", "radix"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("U+001B (escape) at byte 1"));
  EXPECT_EQ(err_.str().find('\x1b'), std::string::npos);
  env_.local_user = "jos\xc3\xa9";
  EXPECT_EQ(Run({"list"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("$USER \"jos\xc3\xa9\": byte 0xC3 (not ASCII) at byte 3"));
  env_.local_user = "alice";
  env_.token_from_env = "tok\r\n";
  EXPECT_EQ(Run({"whoami"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("$GPUPROF_TOKEN: U+000D (carriage return) at byte 3"));
  EXPECT_TRUE(targets_.empty()) << "refused before connecting";
}

TEST_F(CommandsTest, DaemonErrorsThatEchoTextAreEscaped) {
  profiler_.experiment.set_id("exp-000001");
  EXPECT_EQ(Run({"get",
                 "exp-\x1b]0;owned\x07\xc2\x9b"
                 "2J"}),
            2);
  EXPECT_EQ(err_.str(), "error: NOT_FOUND: no experiment exp-\\x1b]0;owned\\x07\\u009b2J\n");
}

TEST(ExitCodeTest, MapsStatusCodes) {
  EXPECT_EQ(ExitCodeForRpcStatus(grpc::StatusCode::INVALID_ARGUMENT), kExitUsage);
  EXPECT_EQ(ExitCodeForRpcStatus(grpc::StatusCode::NOT_FOUND), kExitUsage);
  EXPECT_EQ(ExitCodeForRpcStatus(grpc::StatusCode::UNIMPLEMENTED), kExitUsage);
  EXPECT_EQ(ExitCodeForRpcStatus(grpc::StatusCode::UNAVAILABLE), kExitUnavailable);
  EXPECT_EQ(ExitCodeForRpcStatus(grpc::StatusCode::INTERNAL), kExitOtherError);
  EXPECT_EQ(ExitCodeForRpcStatus(grpc::StatusCode::DEADLINE_EXCEEDED), kExitOtherError);
  EXPECT_EQ(StatusCodeName(grpc::StatusCode::FAILED_PRECONDITION), "FAILED_PRECONDITION");
  EXPECT_EQ(StatusCodeName(grpc::StatusCode::UNAUTHENTICATED), "UNAUTHENTICATED");
}

}  // namespace
}  // namespace gpuprof::client
