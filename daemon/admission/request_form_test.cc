#include "daemon/admission/request_form.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuprof::daemon {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(RequestForm, WellFormedIdsAndNamesPass) {
  v1::GetExperimentRequest get;
  get.set_experiment_id("exp-000042");
  EXPECT_TRUE(CheckRequestForm(get).ok()) << CheckRequestForm(get);
  v1::GetSweepRequest sweep;
  sweep.set_sweep_id("swp-1234567890123456789");
  EXPECT_TRUE(CheckRequestForm(sweep).ok()) << CheckRequestForm(sweep);
  v1::SaveBaselineRequest save;
  save.set_name("main-nov.1");
  save.set_target_id("swp-000003");
  EXPECT_TRUE(CheckRequestForm(save).ok()) << CheckRequestForm(save);
  // Filters that are not set.
  EXPECT_TRUE(CheckRequestForm(v1::ListAuditRequest()).ok());
  EXPECT_TRUE(CheckRequestForm(v1::ListBaselinesRequest()).ok());
  EXPECT_TRUE(CheckRequestForm(v1::ListExperimentsRequest()).ok());
}

TEST(RequestForm, AHugeIdIsRefusedWithABoundedExcerpt) {
  v1::GetExperimentRequest get;
  get.set_experiment_id("exp-" + std::string(10'000, '7'));
  const absl::Status status = CheckRequestForm(get);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("experiment_id: got \"exp-777"), HasSubstr("... (10004 bytes)"),
                    HasSubstr("must be exp- followed by 6-19 digits (at most 23 bytes)")));
  // The message is short whatever the id's size: it fits in any metadata limit.
  EXPECT_LT(status.message().size(), 300u);
}

TEST(RequestForm, IdsOfTheWrongFormAreNamedEscaped) {
  v1::WatchRequest watch;
  EXPECT_THAT(CheckRequestForm(watch).message(), HasSubstr("experiment_id: got \"\" (0 bytes)"));
  watch.set_experiment_id("swp-000001");
  EXPECT_THAT(CheckRequestForm(watch).message(), HasSubstr("must be exp- followed by"));
  watch.set_experiment_id("exp-0000\x1b[2J");
  const absl::Status escaped = CheckRequestForm(watch);
  EXPECT_THAT(escaped.message(), HasSubstr("\"exp-0000\\x1b[2J\""));
  EXPECT_THAT(escaped.message(), Not(HasSubstr("\x1b")));

  v1::CancelSweepRequest cancel;
  cancel.set_sweep_id("exp-000001");
  EXPECT_THAT(CheckRequestForm(cancel).message(), HasSubstr("sweep_id: got \"exp-000001\""));
  v1::ListAuditRequest audit;
  audit.set_experiment_id("exp-42");
  EXPECT_THAT(CheckRequestForm(audit).message(), HasSubstr("experiment_id: got \"exp-42\""));
  // A sweep's audit entries are filed under its sweep id.
  audit.set_experiment_id("swp-000001");
  EXPECT_TRUE(CheckRequestForm(audit).ok());
  audit.set_experiment_id("main");
  EXPECT_THAT(CheckRequestForm(audit).message(), HasSubstr("or a sweep id"));
}

TEST(RequestForm, BaselineNamesAndTargets) {
  v1::SaveBaselineRequest save;
  save.set_name(std::string(129, 'a'));
  save.set_target_id("exp-000001");
  EXPECT_THAT(CheckRequestForm(save).message(),
              AllOf(HasSubstr("name: got \"aaaa"), HasSubstr("(129 bytes)"),
                    HasSubstr("a baseline name is 1-128 characters of [A-Za-z0-9._-]")));
  save.set_name("main");
  save.set_target_id("main-old");
  EXPECT_THAT(CheckRequestForm(save).message(),
              HasSubstr("target_id: got \"main-old\" (8 bytes); must be an experiment id"));
  v1::DeleteBaselineRequest remove;
  remove.set_name("a/b");
  EXPECT_THAT(CheckRequestForm(remove).message(), HasSubstr("name: got \"a/b\""));
}

TEST(RequestForm, TextLengthsAreBounded) {
  v1::CancelRequest cancel;
  cancel.set_experiment_id("exp-000001");
  cancel.set_reason(std::string(1025, 'r'));
  EXPECT_THAT(CheckRequestForm(cancel).message(), HasSubstr("reason: got \"rrrr"));
  EXPECT_THAT(CheckRequestForm(cancel).message(), HasSubstr("(1025 bytes); at most 1024 bytes"));

  v1::ListExperimentsRequest list;
  list.set_page_token(std::string(3 << 20, 'x'));
  EXPECT_THAT(CheckRequestForm(list).message(), HasSubstr("page_token: got \"xxxx"));

  v1::SweepRequest sweep;
  sweep.set_description(std::string(5000, 'd'));
  EXPECT_THAT(CheckRequestForm(sweep).message(), HasSubstr("description: got \"dddd"));
  sweep.clear_description();
  sweep.add_axes()->add_values(std::string(200, '1'));
  EXPECT_THAT(CheckRequestForm(sweep).message(), HasSubstr("axes[0].values[0]: got"));
}

TEST(RequestForm, UnknownEnumsAndInvalidDurationsAnywhere) {
  v1::ListExperimentsRequest list;
  list.add_states(v1::QUEUED);
  list.add_states(static_cast<v1::ExperimentState>(42));
  EXPECT_THAT(CheckRequestForm(list).message(),
              AllOf(HasSubstr("states[1]: got 42"), HasSubstr("QUEUED, RUNNING")));
  list.clear_states();
  list.set_workload(static_cast<v1::Workload>(-3));
  EXPECT_THAT(CheckRequestForm(list).message(), HasSubstr("workload: got -3"));

  v1::SweepRequest sweep;
  sweep.mutable_base()->mutable_timeout()->set_seconds(5);
  sweep.mutable_base()->mutable_timeout()->set_nanos(-1);
  EXPECT_THAT(CheckRequestForm(sweep).message(),
              HasSubstr("base.timeout: got a Duration of seconds 5, nanos -1"));
  sweep.clear_base();
  sweep.set_combination(static_cast<v1::SweepRequest::Combination>(9));
  EXPECT_THAT(CheckRequestForm(sweep).message(),
              HasSubstr("combination: got 9, which gpuprof.v1.SweepRequest.Combination"));
}

}  // namespace
}  // namespace gpuprof::daemon
