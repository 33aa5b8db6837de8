#include "client/story_command.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/terminal_text.h"
#include "report/execution_story.h"

namespace gpuprof::client {

std::string RenderExperimentStory(const ExperimentActivity& activity) {
  std::string text;
  if (activity.state != v1::FINISHED && activity.state != v1::EXPERIMENT_STATE_UNSPECIFIED) {
    absl::StrAppend(&text, "note: the experiment ended ",
                    absl::AsciiStrToLower(v1::ExperimentState_Name(activity.state)),
                    activity.state_reason.empty()
                        ? ""
                        : absl::StrCat(": ", EscapeForTerminal(activity.state_reason)),
                    "; the story covers what it recorded\n");
  }
  if (!activity.has_result && !activity.records.empty()) {
    absl::StrAppend(&text, "note: no result was stored, so the GPU's peaks and the kernel's byte "
                           "count are unknown\n");
  }
  absl::StrAppend(&text, report::RenderExecutionStory(activity.experiment_id, activity.records,
                                                     activity.result));
  return text;
}

}  // namespace gpuprof::client
