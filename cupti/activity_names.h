// Display names for activity records shared by the worker and the client; CUPTI-free.
#ifndef GPUPROF_CUPTI_ACTIVITY_NAMES_H_
#define GPUPROF_CUPTI_ACTIVITY_NAMES_H_

#include <string>

#include "gpuprof/v1/experiment.pb.h"

namespace gpuprof::cupti {

// "warmup", "timed", ... for a phase; "unspecified" for PHASE_UNSPECIFIED.
std::string PhaseName(gpuprof::v1::Phase phase);

}  // namespace gpuprof::cupti

#endif  // GPUPROF_CUPTI_ACTIVITY_NAMES_H_
