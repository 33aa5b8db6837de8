// Custom kernels on a shared box: a submitter's own CUDA code runs on the GPUs, so who may
// submit one is the policy's to say (custom_kernel_users; admins only when unset), a source
// over the daemon's limit is refused before anything is stored, and a stored source is read
// the way its experiment is (get), never in listings. The real gpuprofd (the test's uid, an
// admin) with a policy that lets gpuprof-victim submit custom kernels; the real CLI run as
// gpuprof-mallory (not allowed) and gpuprof-victim over the unix socket (kernel-identified);
// the fake rank worker pretends to run the index experiments (the decisions tested here are
// the daemon's; the GPU work is tests/e2e's). Needs root to make the accounts; skipped with the
// reason otherwise.
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gpuprof/v1/access.pb.h"
#include "gpuprof/v1/experiment.pb.h"
#include "tests/testing/daemon_harness.h"
#include "tests/testing/local_account.h"

namespace gpuprof::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kMallory[] = "gpuprof-mallory";
constexpr char kAuthor[] = "gpuprof-victim";
// The daemon's limit in this test: small, so the oversized source is small too.
constexpr int kMaxSourceBytes = 4096;

constexpr char kKernel[] =
    "#include <gpuprof/contract.h>\n"
    "// An author's gather: the source is theirs.\n"
    "extern \"C\" __global__ void my_gather(const gpuprof::IndexParams p) {}\n";

void WriteReadable(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  chmod(path.c_str(), 0644);
}

// Lower-case hex SHA-256 of a file, as sha256sum prints it.
std::string Sha256Sum(const std::string& path) {
  const CommandResult sum = RunCommand({"/usr/bin/sha256sum", path});
  return sum.out.substr(0, 64);
}

class CustomKernelSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<LocalAccount> mallory = EnsureLocalAccount(kMallory);
    absl::StatusOr<LocalAccount> author = EnsureLocalAccount(kAuthor);
    if (!mallory.ok() || !author.ok()) {
      GTEST_SKIP() << "needs two local accounts besides the test's own: "
                   << (mallory.ok() ? author.status() : mallory.status());
    }
    mallory_ = *mallory;
    author_ = *author;
    // The fake worker's GPUs run index too (inherited by the daemon's workers).
    setenv("FAKE_RANK_GPUS", "2", /*overwrite=*/1);
    setenv("FAKE_RANK_WORKLOADS", "collective,index", /*overwrite=*/1);
    const std::string policy = MakeTempDir("custom-kernel-policy") + "/policy.textproto";
    std::ofstream(policy) << "policy_version: 1\n"
                          << "custom_kernel_users: \"" << kAuthor << "\"\n"
                          << "end_of_policy: true\n";
    daemon_ = std::make_unique<DaemonProcess>(
        MakeTempDir("gpuprofd-custom-kernel"),
        std::vector<std::string>{
            "--policy=" + policy,
            "--worker_binary=" + RunfilePath("tests/ranks/fake_rank_worker"),
            absl::StrCat("--custom_kernel_max_source_bytes=", kMaxSourceBytes)});
    const absl::Status started = daemon_->Start();
    ASSERT_TRUE(started.ok()) << started << daemon_->Log();
    // Each account reads its own copy (Bazel's tree is not theirs to enter).
    for (const LocalAccount* account : {&mallory_, &author_}) {
      WriteReadable(account->home + "/my_gather.cu", kKernel);
      // Over the daemon's limit, well under the CLI's own (256 KiB).
      WriteReadable(account->home + "/huge_gather.cu",
                    absl::StrCat(kKernel, "// ", std::string(kMaxSourceBytes, 'x'), "\n"));
    }
  }

  CommandResult SubmitAs(const LocalAccount& account, const std::string& file) {
    return daemon_->CliAs(account, {"submit", "index", "--kernel-file",
                                    absl::StrCat(account.home, "/", file), "--json"});
  }

  // The experiment id of a submit's first event; "" if none.
  static std::string IdOf(const CommandResult& submitted) {
    auto events = ParseEventLines(submitted.out);
    return events.ok() && !events->empty() ? events->front().experiment_id() : "";
  }

  std::vector<v1::Experiment> ListedAs(const LocalAccount& account, const std::string& user) {
    const CommandResult listed = daemon_->CliAs(account, {"list", "--user", user, "--json"});
    EXPECT_EQ(listed.exit_code, 0) << listed.err;
    auto experiments = ParseJsonLines<v1::Experiment>(listed.out);
    EXPECT_TRUE(experiments.ok()) << experiments.status();
    return experiments.value_or(std::vector<v1::Experiment>());
  }

  // The audit trail, read as the daemon's user (an admin).
  std::vector<v1::AuditEntry> Audit() {
    const CommandResult audit = daemon_->CliAsIs({"audit", "--limit", "1000", "--json"});
    EXPECT_EQ(audit.exit_code, 0) << audit.err;
    auto entries = ParseJsonLines<v1::AuditEntry>(audit.out);
    EXPECT_TRUE(entries.ok()) << entries.status();
    return entries.value_or(std::vector<v1::AuditEntry>());
  }

  LocalAccount mallory_;
  LocalAccount author_;
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(CustomKernelSecurityTest, AUserThePolicyDoesNotNameCannotRunTheirOwnKernel) {
  const CommandResult refused = SubmitAs(mallory_, "my_gather.cu");
  EXPECT_EQ(refused.exit_code, 2) << refused.out << refused.err;
  EXPECT_THAT(refused.err,
              AllOf(HasSubstr("PERMISSION_DENIED"),
                    HasSubstr(absl::StrCat("custom_kernel: ", kMallory)),
                    HasSubstr("may not submit custom kernels on this daemon; the access policy's "
                              "custom_kernel_users, custom_kernel_groups or "
                              "custom_kernels_for_everyone say who may")));
  EXPECT_TRUE(ListedAs(mallory_, kMallory).empty());
  // Our kernel is hers to run.
  const CommandResult ours = daemon_->CliAs(mallory_, {"submit", "index", "--json"});
  EXPECT_EQ(ours.exit_code, 0) << ours.err;

  // The author, whom the policy names, may; the audit trail has the refusal and the author's
  // submission with the source's hash and size.
  const CommandResult admitted = SubmitAs(author_, "my_gather.cu");
  ASSERT_EQ(admitted.exit_code, 0) << admitted.out << admitted.err << daemon_->Log();
  const std::string id = IdOf(admitted);
  ASSERT_FALSE(id.empty()) << admitted.out;
  bool refusal_audited = false;
  bool submit_audited = false;
  for (const v1::AuditEntry& entry : Audit()) {
    if (entry.actor() == kMallory && entry.action() == "refuse" &&
        absl::StrContains(entry.detail(), "custom-kernel: ")) {
      refusal_audited = true;
    }
    if (entry.actor() == kAuthor && entry.action() == "submit" && entry.experiment_id() == id) {
      EXPECT_EQ(entry.detail(),
                absl::StrCat("WORKLOAD_INDEX; custom kernel my_gather.cu (my_gather), source "
                             "sha256 ",
                             Sha256Sum(author_.home + "/my_gather.cu"), ", ",
                             sizeof(kKernel) - 1, " bytes"));
      submit_audited = true;
    }
  }
  EXPECT_TRUE(refusal_audited);
  EXPECT_TRUE(submit_audited);
}

TEST_F(CustomKernelSecurityTest, ASourceOverTheDaemonsLimitIsRefusedBeforeAnythingIsStored) {
  const CommandResult refused = SubmitAs(author_, "huge_gather.cu");
  EXPECT_EQ(refused.exit_code, 2) << refused.out << refused.err;
  EXPECT_THAT(refused.err,
              HasSubstr(absl::StrCat("custom_kernel.source: ",
                                     sizeof(kKernel) - 1 + 3 + kMaxSourceBytes + 1,
                                     " bytes; at most ", kMaxSourceBytes,
                                     " allowed (gpuprofd --custom_kernel_max_source_bytes)")));
  EXPECT_TRUE(ListedAs(author_, kAuthor).empty());
  for (const v1::AuditEntry& entry : Audit()) {
    EXPECT_NE(entry.action(), "submit") << entry.detail();
  }
}

TEST_F(CustomKernelSecurityTest, AStoredSourceIsNeverListedAndIsReadAsItsExperimentIs) {
  const CommandResult admitted = SubmitAs(author_, "my_gather.cu");
  ASSERT_EQ(admitted.exit_code, 0) << admitted.out << admitted.err << daemon_->Log();
  const std::string id = IdOf(admitted);
  ASSERT_FALSE(id.empty()) << admitted.out;

  // Listings carry which kernel it is, never the source: not to another user, nor its author.
  for (const LocalAccount* reader : {&mallory_, &author_}) {
    const std::vector<v1::Experiment> listed = ListedAs(*reader, kAuthor);
    ASSERT_EQ(listed.size(), 1u) << reader->name;
    EXPECT_EQ(listed[0].request().custom_kernel().kernel_name(), "my_gather") << reader->name;
    EXPECT_EQ(listed[0].request().custom_kernel().source(), "") << reader->name;
    const CommandResult table = daemon_->CliAs(*reader, {"list", "--user", kAuthor});
    EXPECT_THAT(table.out, Not(HasSubstr("source is theirs"))) << reader->name;
  }

  // get returns it to whoever may read the experiment: on this box every identified user
  // (docs/security.md, "What each user may do"), the author and another alike.
  for (const LocalAccount* reader : {&author_, &mallory_}) {
    const CommandResult got = daemon_->CliAs(*reader, {"get", id, "--json"});
    ASSERT_EQ(got.exit_code, 0) << got.err;
    auto experiment = ParseExperiment(got.out);
    ASSERT_TRUE(experiment.ok()) << experiment.status() << got.out;
    EXPECT_EQ(experiment->request().custom_kernel().source(), kKernel) << reader->name;
  }
}

}  // namespace
}  // namespace gpuprof::testing
