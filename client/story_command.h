// `gpuprof story ID`: the execution story of an experiment (cupti/execution_story.h) from the
// records and result it stored, fetched as `gpuprof trace` does.
#ifndef GPUPROF_CLIENT_STORY_COMMAND_H_
#define GPUPROF_CLIENT_STORY_COMMAND_H_

#include <string>

#include "client/trace_command.h"

namespace gpuprof::client {

// The story, preceded by a line on how the experiment ended when it did not finish.
std::string RenderExperimentStory(const ExperimentActivity& activity);

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_STORY_COMMAND_H_
