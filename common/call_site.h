// Where a status helper was called from, captured by a default argument at the call site:
// `CallSite site = CallSite::Current()`. Not std::source_location: clang 14 (the sanitizer
// builds' compiler) cannot compile libstdc++ 12's <source_location>, while __builtin_FILE and
// __builtin_LINE work in both GCC and clang.
#ifndef GPUPROF_COMMON_CALL_SITE_H_
#define GPUPROF_COMMON_CALL_SITE_H_

namespace gpuprof {

class CallSite {
 public:
  static constexpr CallSite Current(const char* file = __builtin_FILE(),
                                    int line = __builtin_LINE()) {
    return CallSite(file, line);
  }
  constexpr const char* file_name() const { return file_; }
  constexpr int line() const { return line_; }

 private:
  constexpr CallSite(const char* file, int line) : file_(file), line_(line) {}
  const char* file_;
  int line_;
};

}  // namespace gpuprof

#endif  // GPUPROF_COMMON_CALL_SITE_H_
