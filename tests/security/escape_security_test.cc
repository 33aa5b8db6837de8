// Finding 7 and two of finding 10: text one user writes reaches another user's terminal. A
// second local account (gpuprof-mallory) puts an OSC title sequence and a screen clear in a
// radix experiment's label and description, and in every other free-text field it can reach;
// the daemon refuses each (exit 2, the field and the character named). Text that is already
// stored (a database from before the check, written here with the daemon stopped) or that the
// daemon echoes in an error reaches another account's `get`, `list` and `watch`, and root's,
// with every control character shown escaped: no raw ESC, BEL, DEL, C1 or bidi override in
// the output, and JSON that still parses back to the exact text. Also: `gpuprof --user $'a\nb'`
// exits 2 (gRPC aborted the CLI, exit 134), and `gpuprof token-hash` matches sha256sum.
#include <sys/stat.h>

#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/terminal_text.h"
#include "daemon/store/experiment_store.h"
#include "google/protobuf/util/json_util.h"
#include "gpuprof/v1/profiler.grpc.pb.h"
#include "tests/testing/daemon_harness.h"
#include "tests/testing/local_account.h"

namespace gpuprof::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kMallory[] = "gpuprof-mallory";
constexpr char kVictim[] = "gpuprof-victim";

// Sets the terminal's title to "owned" (OSC 0 ... BEL), clears the screen and homes the cursor.
constexpr char kTitleAndClear[] = "\x1b]0;owned\x07\x1b[2J\x1b[H";
// The same title and clear, plus a C1 CSI (U+009B), a right-to-left override, DEL and a forged
// line: what an old database may hold.
const std::string kStoredHostile = absl::StrCat(kTitleAndClear,
                                                "\xc2\x9b"
                                                "31mred \xe2\x80\xae"
                                                "txt.exe\x7f\nstate: finished");
// How the CLI shows kTitleAndClear.
constexpr char kTitleAndClearShown[] = "\\x1b]0;owned\\x07\\x1b[2J\\x1b[H";

// Where `text` holds a character a terminal would act on; newlines and tabs are layout.
std::optional<std::string> RawControl(const std::string& text) {
  std::string without_layout = text;
  for (char& c : without_layout) {
    if (c == '\n' || c == '\t') c = ' ';
  }
  const std::optional<UnsafeCharacter> found = FindUnsafeCharacter(without_layout);
  if (!found.has_value()) return std::nullopt;
  return absl::StrCat(
      DescribeUnsafeCharacter(*found), " at byte ", found->byte_offset, " in \"",
      EscapeForTerminal(text.substr(found->byte_offset > 60 ? found->byte_offset - 60 : 0, 120)),
      "\"");
}

// Both streams of a CLI run are terminal output.
void ExpectNoRawControl(const CommandResult& result, const std::string& what) {
  const auto out = RawControl(result.out);
  EXPECT_FALSE(out.has_value()) << what << " stdout: " << *out;
  const auto err = RawControl(result.err);
  EXPECT_FALSE(err.has_value()) << what << " stderr: " << *err;
}

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

class EscapeSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto mallory = EnsureLocalAccount(kMallory);
    if (!mallory.ok()) GTEST_SKIP() << "no second local account: " << mallory.status();
    auto victim = EnsureLocalAccount(kVictim);
    if (!victim.ok()) GTEST_SKIP() << "no third local account: " << victim.status();
    mallory_ = *mallory;
    victim_ = *victim;
    state_dir_ = MakeTempDir("gpuprofd-escape");
    daemon_ = std::make_unique<DaemonProcess>(
        state_dir_, std::vector<std::string>{"--enable_test_faults", "--cpu_slots=1"});
    const absl::Status started = daemon_->Start();
    ASSERT_TRUE(started.ok()) << started << daemon_->Log();
  }

  // An experiment as an old database may hold it: mallory's radix run whose description,
  // label, progress message, failure reason and stderr tail carry kStoredHostile. Written with
  // the daemon stopped, through the store the daemon reads; returns its id.
  std::string StoreHostileExperiment() {
    EXPECT_EQ(daemon_->Stop(), 0) << daemon_->Log();
    std::string id;
    {
      auto store = daemon::ExperimentStore::Open(state_dir_ + "/gpuprof.db");
      EXPECT_TRUE(store.ok()) << store.status();
      if (!store.ok()) return "";
      v1::Experiment experiment;
      experiment.set_user(kMallory);
      experiment.set_workload(v1::WORKLOAD_RADIX);
      experiment.mutable_request()->mutable_radix()->set_num_requests(100);
      experiment.mutable_request()->set_user(kMallory);
      experiment.mutable_request()->set_description(kStoredHostile);
      (*experiment.mutable_request()->mutable_labels())["team"] = kStoredHostile;
      experiment.set_state(v1::QUEUED);
      experiment.mutable_created()->set_seconds(absl::ToUnixSeconds(absl::Now()));
      v1::ExperimentEvent queued;
      queued.set_seq(1);
      *queued.mutable_time() = experiment.created();
      queued.mutable_state()->set_state(v1::QUEUED);
      auto created = (*store)->Create(experiment, queued);
      EXPECT_TRUE(created.ok()) << created.status();
      if (!created.ok()) return "";
      id = *created;
      experiment.set_id(id);

      v1::ExperimentEvent running;
      running.set_seq(2);
      *running.mutable_time() = experiment.created();
      running.mutable_state()->set_state(v1::RUNNING);
      experiment.set_state(v1::RUNNING);
      *experiment.mutable_started() = experiment.created();
      EXPECT_TRUE((*store)->Update(experiment, running).ok());

      v1::ExperimentEvent progress;
      progress.set_seq(3);
      *progress.mutable_time() = experiment.created();
      progress.mutable_progress()->set_phase(v1::PHASE_TIMED);
      progress.mutable_progress()->set_message(kStoredHostile);
      EXPECT_TRUE((*store)->Update(experiment, progress).ok());

      v1::ExperimentEvent failed;
      failed.set_seq(4);
      *failed.mutable_time() = experiment.created();
      failed.mutable_state()->set_state(v1::FAILED);
      failed.mutable_state()->set_reason(kStoredHostile);
      failed.mutable_state()->set_worker_stderr_tail(absl::StrCat("line 1\n", kStoredHostile));
      experiment.set_state(v1::FAILED);
      experiment.set_reason(kStoredHostile);
      experiment.set_worker_stderr_tail(absl::StrCat("line 1\n", kStoredHostile));
      *experiment.mutable_finished() = experiment.created();
      EXPECT_TRUE((*store)->Update(experiment, failed).ok());
    }
    const absl::Status restarted = daemon_->Start();
    EXPECT_TRUE(restarted.ok()) << restarted << daemon_->Log();
    return id;
  }

  LocalAccount mallory_;
  LocalAccount victim_;
  std::string state_dir_;
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(EscapeSecurityTest, TheDaemonRefusesControlCharactersInEveryTextField) {
  const CommandResult label = daemon_->CliAs(
      mallory_,
      {"submit", "radix", "--requests", "100", "--label", absl::StrCat("team=", kTitleAndClear)});
  EXPECT_EQ(label.exit_code, 2) << label.out << label.err;
  EXPECT_THAT(label.err, HasSubstr("INVALID_ARGUMENT: labels[team]: U+001B (escape) at byte 0 is "
                                   "not allowed; must be printable UTF-8 text"));
  ExpectNoRawControl(label, "refused label");

  const CommandResult description =
      daemon_->CliAs(mallory_, {"submit", "radix", "--requests", "100", "--description",
                                absl::StrCat("prefix hits ", kTitleAndClear)});
  EXPECT_EQ(description.exit_code, 2) << description.out << description.err;
  EXPECT_THAT(description.err, HasSubstr("description: U+001B (escape) at byte 12 is not allowed"));
  ExpectNoRawControl(description, "refused description");

  // C1 and bidi characters are refused as well.
  const CommandResult bidi = daemon_->CliAs(mallory_, {"submit", "radix", "--description",
                                                       "invoice\xe2\x80\xae"
                                                       "fdp.exe"});
  EXPECT_EQ(bidi.exit_code, 2) << bidi.err;
  EXPECT_THAT(bidi.err, HasSubstr("description: U+202E (right-to-left override) at byte 7"));
  ExpectNoRawControl(bidi, "refused bidi override");

  const CommandResult sweep = daemon_->CliAs(
      mallory_, {"sweep", "radix", "--requests", "100,200", "--description", kTitleAndClear});
  EXPECT_EQ(sweep.exit_code, 2) << sweep.out << sweep.err;
  EXPECT_THAT(sweep.err, HasSubstr("description: U+001B (escape) at byte 0"));
  ExpectNoRawControl(sweep, "refused sweep description");

  // Nothing of mallory's was stored.
  const CommandResult listed = daemon_->CliAsIs({"list", "--user", kMallory, "--json"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_EQ(listed.out, "");  // NDJSON: no experiment, no line

  // A cancel reason: mallory's own experiment, which runs until cancelled.
  const CommandResult submitted = daemon_->CliAs(
      mallory_,
      {"submit", "radix", "--requests", "100", "--label", "gpuprof.fault=hang", "--json"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  auto events = ParseEventLines(submitted.out);
  ASSERT_TRUE(events.ok() && !events->empty()) << submitted.out;
  const std::string id = events->front().experiment_id();
  const CommandResult bad_cancel =
      daemon_->CliAs(mallory_, {"cancel", id, "--reason", absl::StrCat("done", kTitleAndClear)});
  EXPECT_EQ(bad_cancel.exit_code, 2) << bad_cancel.out << bad_cancel.err;
  EXPECT_THAT(bad_cancel.err, HasSubstr("reason: U+001B (escape) at byte 4"));
  ExpectNoRawControl(bad_cancel, "refused cancel reason");
  const CommandResult cancelled = daemon_->CliAs(mallory_, {"cancel", id, "--reason", "done"});
  EXPECT_EQ(cancelled.exit_code, 0) << cancelled.err;
  EXPECT_THAT(cancelled.out, HasSubstr(absl::StrCat(id, ": cancelled (done)")));

  // A baseline's description.
  const CommandResult baseline = daemon_->CliAs(
      mallory_, {"baseline", "save", "mallory-main", id, "--description", kTitleAndClear});
  EXPECT_EQ(baseline.exit_code, 2) << baseline.out << baseline.err;
  EXPECT_THAT(baseline.err, HasSubstr("description: U+001B (escape) at byte 0"));
  ExpectNoRawControl(baseline, "refused baseline description");
}

TEST_F(EscapeSecurityTest, StoredTextIsShownEscapedToOtherUsers) {
  const std::string id = StoreHostileExperiment();
  ASSERT_FALSE(id.empty());

  for (const auto& [who, run] : std::vector<
           std::pair<std::string, std::function<CommandResult(const std::vector<std::string>&)>>>{
           {"victim",
            [this](const std::vector<std::string>& args) { return daemon_->CliAs(victim_, args); }},
           {"root",
            [this](const std::vector<std::string>& args) { return daemon_->CliAsIs(args); }}}) {
    const CommandResult get = run({"get", id});
    ASSERT_EQ(get.exit_code, 0) << who << ": " << get.err;
    ExpectNoRawControl(get, who + " get");
    EXPECT_THAT(get.out,
                HasSubstr(absl::StrCat("description:  ", kTitleAndClearShown,
                                       "\\u009b31mred \\u202etxt.exe\\x7f\\nstate: finished\n")))
        << get.out;
    EXPECT_THAT(get.out, HasSubstr(absl::StrCat("labels:       team=", kTitleAndClearShown)));
    EXPECT_THAT(get.out, HasSubstr(absl::StrCat("reason:       ", kTitleAndClearShown)));
    EXPECT_THAT(get.out, HasSubstr(absl::StrCat("  | line 1\n  | ", kTitleAndClearShown)));

    const CommandResult list = run({"list", "--all"});
    ASSERT_EQ(list.exit_code, 0) << who << ": " << list.err;
    ExpectNoRawControl(list, who + " list");
    EXPECT_THAT(list.out, HasSubstr(id));

    // watch replays the stored events: the progress message and the failure.
    const CommandResult watch = run({"watch", id});
    EXPECT_EQ(watch.exit_code, 1) << who << ": " << watch.err;
    ExpectNoRawControl(watch, who + " watch");
    EXPECT_THAT(watch.out, HasSubstr(absl::StrCat(id, " failed: ", kTitleAndClearShown)));
    EXPECT_THAT(watch.out, HasSubstr(absl::StrCat("timed: ", kTitleAndClearShown)));

    // JSON stays JSON: every unsafe character as \uXXXX, the text itself unchanged.
    const CommandResult json = run({"get", id, "--json"});
    ASSERT_EQ(json.exit_code, 0) << json.err;
    ExpectNoRawControl(json, who + " get --json");
    auto parsed = ParseExperiment(json.out);
    ASSERT_TRUE(parsed.ok()) << parsed.status() << json.out;
    EXPECT_EQ(parsed->request().description(), kStoredHostile);
    EXPECT_EQ(parsed->request().labels().at("team"), kStoredHostile);
    const CommandResult watch_json = run({"watch", id, "--json"});
    ExpectNoRawControl(watch_json, who + " watch --json");
    auto replayed = ParseEventLines(watch_json.out);
    ASSERT_TRUE(replayed.ok()) << replayed.status();
    ASSERT_EQ(replayed->size(), 4u);
    EXPECT_EQ((*replayed)[2].progress().message(), kStoredHostile);
    const CommandResult list_json = run({"list", "--json"});
    ExpectNoRawControl(list_json, who + " list --json");
    const auto listed = ParseJsonLines<v1::Experiment>(list_json.out);
    ASSERT_TRUE(listed.ok()) << listed.status();
    ASSERT_EQ(listed->size(), 1u);
    EXPECT_EQ((*listed)[0].reason(), kStoredHostile);
  }
}

TEST_F(EscapeSecurityTest, ErrorsThatEchoTextAreShownEscaped) {
  // The daemon's NOT_FOUND names the id it was given.
  const std::string id = absl::StrCat("exp-", kTitleAndClear);
  const CommandResult get = daemon_->CliAs(victim_, {"get", id});
  EXPECT_EQ(get.exit_code, 2) << get.err;
  ExpectNoRawControl(get, "get of a hostile id");
  EXPECT_THAT(get.err, HasSubstr(kTitleAndClearShown));
}

TEST_F(EscapeSecurityTest, AUserNameGrpcCannotSendExitsTwoNotAnAbort) {
  for (const std::string& user :
       {std::string("a\nb"), std::string("x\x1b[2J"), std::string("jos\xc3\xa9")}) {
    const CommandResult result = daemon_->CliAs(mallory_, {"--user", user, "whoami"});
    EXPECT_EQ(result.exit_code, 2) << EscapeForTerminal(user) << ": " << result.err;
    EXPECT_THAT(result.err, HasSubstr("error: --user \""));
    EXPECT_THAT(result.err, HasSubstr("cannot be sent; it travels in a gRPC header, which "
                                      "carries printable ASCII only (0x20-0x7E)"));
    ExpectNoRawControl(result, "refused --user");
  }
  const CommandResult newline = daemon_->CliAs(mallory_, {"--user", "a\nb", "whoami"});
  EXPECT_THAT(newline.err, HasSubstr("--user \"a\\nb\": U+000A (newline) at byte 1"));
}

TEST_F(EscapeSecurityTest, TokenHashMatchesSha256sum) {
  const std::string gpuprof = SharedBinary("client/gpuprof");
  const std::string token = "ci-token_0123456789abcdefABCDEF";
  const CommandResult expected =
      RunCommand({"/bin/sh", "-c", absl::StrCat("printf %s '", token, "' | sha256sum")});
  ASSERT_EQ(expected.exit_code, 0) << expected.err;
  // "<64 hex digits>  -"
  const std::string digest = expected.out.substr(0, 64);
  ASSERT_EQ(expected.out.substr(64), "  -\n") << expected.out;

  // From a file (its final newline is not part of the token), from stdin and from the
  // environment, as mallory; no daemon involved.
  const std::string file = absl::StrCat(mallory_.home, "/token");
  const CommandResult wrote = RunCommandAs(
      mallory_, {"/bin/sh", "-c", absl::StrCat("umask 077; echo '", token, "' > ", file)});
  ASSERT_EQ(wrote.exit_code, 0) << wrote.err;
  const CommandResult from_file = RunCommandAs(mallory_, {gpuprof, "token-hash", file});
  EXPECT_EQ(from_file.exit_code, 0) << from_file.err;
  EXPECT_EQ(from_file.out, digest + "\n");
  const CommandResult from_stdin = RunCommandAs(
      mallory_,
      {"/bin/sh", "-c",
       absl::StrCat("printf %s '", token, "' | ", gpuprof, " token-hash --user-name ci")});
  EXPECT_EQ(from_stdin.exit_code, 0) << from_stdin.err;
  EXPECT_EQ(from_stdin.out,
            absl::StrCat(digest, "\ntokens { user: \"ci\" sha256: \"", digest, "\" }\n"));
  const CommandResult from_env = RunCommandAs(mallory_, {gpuprof, "token-hash"}, absl::Seconds(60),
                                              {"GPUPROF_TOKEN=" + token});
  EXPECT_EQ(from_env.out, digest + "\n") << from_env.err;

  // --generate: a new file only its owner can read, and the hash of what is in it.
  const std::string generated = absl::StrCat(mallory_.home, "/generated-token");
  const CommandResult generate =
      RunCommandAs(mallory_, {gpuprof, "token-hash", "--generate", generated, "--user-name", "ci"});
  ASSERT_EQ(generate.exit_code, 0) << generate.err;
  struct stat info {};
  ASSERT_EQ(stat(generated.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  EXPECT_EQ(info.st_uid, mallory_.uid);
  const CommandResult generated_digest =
      RunCommand({"/bin/sh", "-c", absl::StrCat("tr -d '\\n' < ", generated, " | sha256sum")});
  const std::string generated_hash = generated_digest.out.substr(0, 64);
  EXPECT_EQ(generate.out, absl::StrCat(generated_hash, "\ntokens { user: \"ci\" sha256: \"",
                                       generated_hash, "\" }\n"));
  EXPECT_EQ(std::string(absl::StripAsciiWhitespace(ReadFile(generated))).size(), 43u);
  const CommandResult again =
      RunCommandAs(mallory_, {gpuprof, "token-hash", "--generate", generated, "--user-name", "ci"});
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_THAT(again.err, HasSubstr("already exists"));
}

}  // namespace
}  // namespace gpuprof::testing
