// RETURN_IF_ERROR / ASSIGN_OR_RETURN for absl::Status code (Debian's abseil has no
// status_macros.h of its own).
#ifndef GPUPROF_COMMON_STATUS_MACROS_H_
#define GPUPROF_COMMON_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define GPUPROF_STATUS_CONCAT_INNER(a, b) a##b
#define GPUPROF_STATUS_CONCAT(a, b) GPUPROF_STATUS_CONCAT_INNER(a, b)

// Returns the status of `expr` from the enclosing function when it is not OK.
#define RETURN_IF_ERROR(expr)                          \
  do {                                                 \
    ::absl::Status gpuprof_status_ = (expr);           \
    if (!gpuprof_status_.ok()) return gpuprof_status_; \
  } while (false)

// ASSIGN_OR_RETURN(lhs, expr): evaluates the StatusOr `expr`; returns its status when it is
// not OK, else moves its value into `lhs` (which may declare a variable: `auto x`).
#define ASSIGN_OR_RETURN(lhs, expr) \
  GPUPROF_ASSIGN_OR_RETURN_IMPL(GPUPROF_STATUS_CONCAT(gpuprof_statusor_, __LINE__), lhs, expr)

#define GPUPROF_ASSIGN_OR_RETURN_IMPL(statusor, lhs, expr) \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = *std::move(statusor)

#endif  // GPUPROF_COMMON_STATUS_MACROS_H_
