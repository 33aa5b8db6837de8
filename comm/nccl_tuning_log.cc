#include "comm/nccl_tuning_log.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace gpuprof::comm {

std::optional<NcclChoice> ParseNcclTuningLine(absl::string_view line,
                                              absl::string_view operation) {
  // "host:pid:tid [rank] NCCL INFO AllReduce: 8 Bytes -> Algo RING proto LL channel{..}"
  const std::string prefix = absl::StrCat(" ", operation, ": ");
  const size_t at = line.find(prefix);
  if (operation.empty() || at == absl::string_view::npos) return std::nullopt;
  absl::string_view rest = line.substr(at + prefix.size());
  const size_t arrow = rest.find(" Bytes -> Algo ");
  if (arrow == absl::string_view::npos) return std::nullopt;
  rest.remove_prefix(arrow + sizeof(" Bytes -> Algo ") - 1);
  const std::vector<absl::string_view> words = absl::StrSplit(rest, ' ', absl::SkipEmpty());
  if (words.size() < 3 || words[1] != "proto") return std::nullopt;
  return NcclChoice{.algorithm = std::string(words[0]), .protocol = std::string(words[2])};
}

std::string NcclLogOperationName(absl::string_view operation) {
  if (operation == "all_reduce") return "AllReduce";
  if (operation == "all_gather") return "AllGather";
  if (operation == "reduce_scatter") return "ReduceScatter";
  if (operation == "broadcast") return "Broadcast";
  if (operation == "reduce") return "Reduce";
  return "";
}

NcclTuningLog NcclTuningLog::EnableForThisProcess() {
  if (getenv("NCCL_DEBUG") != nullptr || getenv("NCCL_DEBUG_SUBSYS") != nullptr ||
      getenv("NCCL_DEBUG_FILE") != nullptr) {
    return NcclTuningLog(-1);
  }
  const char* tmp = getenv("TMPDIR");
  std::string path = absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp",
                                  "/gpuprof-nccl-log-XXXXXX");
  const int fd = mkostemp(path.data(), O_CLOEXEC);
  if (fd < 0) return NcclTuningLog(-1);
  // Unlinked at once: nothing is left behind however the process ends. NCCL opens it again
  // through /proc/self/fd, which reaches the same file.
  unlink(path.c_str());
  const std::string through_proc = absl::StrCat("/proc/self/fd/", fd);
  setenv("NCCL_DEBUG", "INFO", 0);
  setenv("NCCL_DEBUG_SUBSYS", "TUNING", 0);
  setenv("NCCL_DEBUG_FILE", through_proc.c_str(), 0);
  return NcclTuningLog(fd);
}

NcclTuningLog::NcclTuningLog(NcclTuningLog&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      offset_(other.offset_),
      partial_line_(std::move(other.partial_line_)) {}

NcclTuningLog& NcclTuningLog::operator=(NcclTuningLog&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    offset_ = other.offset_;
    partial_line_ = std::move(other.partial_line_);
  }
  return *this;
}

NcclTuningLog::~NcclTuningLog() {
  if (fd_ >= 0) close(fd_);
}

std::optional<NcclChoice> NcclTuningLog::LatestChoice(absl::string_view operation) {
  if (fd_ < 0) return std::nullopt;
  std::string text = std::move(partial_line_);
  partial_line_.clear();
  char buffer[1 << 14];
  while (true) {
    const ssize_t got = pread(fd_, buffer, sizeof(buffer), offset_);
    if (got <= 0) break;
    text.append(buffer, static_cast<size_t>(got));
    offset_ += got;
  }
  std::optional<NcclChoice> latest;
  const size_t last_newline = text.rfind('\n');
  if (last_newline == std::string::npos) {
    partial_line_ = std::move(text);
    return latest;
  }
  partial_line_ = text.substr(last_newline + 1);
  text.resize(last_newline);
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StrContains(line, " NCCL WARN ")) {
      std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
      continue;
    }
    if (auto choice = ParseNcclTuningLine(line, operation)) latest = std::move(choice);
  }
  return latest;
}

NcclTuningLog& ProcessNcclTuningLog() {
  // Never destroyed: NCCL may write to the file until the process ends.
  static NcclTuningLog* const log = new NcclTuningLog(NcclTuningLog::EnableForThisProcess());
  return *log;
}

}  // namespace gpuprof::comm
