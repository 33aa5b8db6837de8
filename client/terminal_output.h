// The CLI's last line of defence against control characters in text from other people: every
// byte gpuprof writes to stdout and stderr passes through a TerminalSafeStreambuf, which lets
// newlines and tabs through and makes every other unsafe character visible (the escapes of
// EscapeForTerminal, common/terminal_text.h), whatever printed it. The renderers escape the
// text they format as well (so that a newline in a label cannot break a table's layout); this
// catches what a renderer forgot. The CLI's own control sequences (the live progress line's
// carriage return and clear-to-end-of-line) go through WriteTerminalControl.
#ifndef GPUPROF_CLIENT_TERMINAL_OUTPUT_H_
#define GPUPROF_CLIENT_TERMINAL_OUTPUT_H_

#include <mutex>
#include <ostream>
#include <streambuf>
#include <string>

#include "absl/strings/string_view.h"

namespace gpuprof::client {

class TerminalSafeStreambuf : public std::streambuf {
 public:
  // Writes to `destination`, which must outlive this.
  explicit TerminalSafeStreambuf(std::streambuf* destination);
  // Writes a held incomplete UTF-8 sequence (escaped: nothing completed it).
  ~TerminalSafeStreambuf() override;

  TerminalSafeStreambuf(const TerminalSafeStreambuf&) = delete;
  TerminalSafeStreambuf& operator=(const TerminalSafeStreambuf&) = delete;

  // `bytes` as they are: the CLI's own control sequences.
  void WriteControl(absl::string_view bytes);
  // Writes a held incomplete UTF-8 sequence, escaped, and flushes the destination.
  void Finish();
  std::streambuf* destination() const { return destination_; }

 protected:
  int_type overflow(int_type c) override;
  std::streamsize xsputn(const char* data, std::streamsize size) override;
  int sync() override;

 private:
  void Write(absl::string_view bytes);
  void WriteHeldLocked();

  // std::cout may be written from several threads (the standard allows it); held_ is shared.
  std::mutex mutex_;
  std::streambuf* destination_;
  // The start of a UTF-8 sequence that the next write may complete (a character split across
  // two writes must not be taken for two invalid bytes).
  std::string held_;
};

// Writes `sequence` raw when `out` writes through a TerminalSafeStreambuf, else as is (tests
// that render into a string stream).
void WriteTerminalControl(std::ostream& out, absl::string_view sequence);

// Puts a TerminalSafeStreambuf between `stream` and its buffer for this object's lifetime.
class ScopedTerminalSafeOutput {
 public:
  explicit ScopedTerminalSafeOutput(std::ostream& stream);
  ~ScopedTerminalSafeOutput();

  ScopedTerminalSafeOutput(const ScopedTerminalSafeOutput&) = delete;
  ScopedTerminalSafeOutput& operator=(const ScopedTerminalSafeOutput&) = delete;

 private:
  std::ostream& stream_;
  TerminalSafeStreambuf filter_;
};

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_TERMINAL_OUTPUT_H_
