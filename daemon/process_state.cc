#include "daemon/process_state.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace gpuprof {

std::string DescribeProcessState(pid_t pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!stat || !std::getline(stat, line)) return "gone";
  // "PID (comm) S ...": the name may hold spaces and parentheses, the state follows the last ')'.
  const size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return "unknown";
  switch (line[close + 2]) {
    case 'R':
      return "running";
    case 'S':
      return "sleeping";
    case 'D':
      return "in uninterruptible sleep (D)";
    case 'T':
    case 't':
      return "stopped (by a signal or a debugger)";
    case 'Z':
      return "a zombie";
    case 'X':
      return "gone";
    default:
      return absl::StrCat("in state ", std::string(1, line[close + 2]));
  }
}

}  // namespace gpuprof
