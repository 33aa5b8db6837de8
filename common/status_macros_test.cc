#include "common/status_macros.h"

#include <string>

#include <gtest/gtest.h>

namespace gpuprof {
namespace {

absl::StatusOr<int> ParsePositive(int value) {
  if (value <= 0) return absl::InvalidArgumentError("value must be positive");
  return value;
}

absl::Status CheckPositive(int value) {
  RETURN_IF_ERROR(ParsePositive(value).status());
  return absl::OkStatus();
}

absl::StatusOr<int> DoubleIt(int value) {
  ASSIGN_OR_RETURN(int parsed, ParsePositive(value));
  return parsed * 2;
}

absl::StatusOr<std::string> Concatenate(int a, int b) {
  ASSIGN_OR_RETURN(auto first, ParsePositive(a));
  ASSIGN_OR_RETURN(auto second, ParsePositive(b));
  return std::to_string(first) + std::to_string(second);
}

TEST(StatusMacros, ReturnIfErrorPassesErrorsThrough) {
  EXPECT_TRUE(CheckPositive(3).ok());
  EXPECT_EQ(CheckPositive(-1).code(), absl::StatusCode::kInvalidArgument);
}

TEST(StatusMacros, AssignOrReturnAssignsOrReturns) {
  EXPECT_EQ(*DoubleIt(21), 42);
  EXPECT_EQ(DoubleIt(0).status().message(), "value must be positive");
  EXPECT_EQ(*Concatenate(1, 2), "12");
  EXPECT_FALSE(Concatenate(1, -2).ok());
}

}  // namespace
}  // namespace gpuprof
