#include "client/terminal_output.h"

#include <algorithm>
#include <cstdint>

#include "common/terminal_text.h"

namespace gpuprof::client {
namespace {

// Bytes that never need escaping: printable ASCII, newline and tab.
bool IsPlainByte(char c) {
  const auto byte = static_cast<uint8_t>(c);
  return (byte >= 0x20 && byte < 0x7F) || c == '\n' || c == '\t';
}

// How many bytes at the end of `bytes` start a UTF-8 sequence that is valid so far but not
// complete: a lead byte with fewer continuation bytes than it announces.
size_t IncompleteTail(absl::string_view bytes) {
  const size_t look = std::min<size_t>(bytes.size(), 3);
  for (size_t back = 1; back <= look; ++back) {
    const auto byte = static_cast<uint8_t>(bytes[bytes.size() - back]);
    if ((byte & 0xC0) == 0x80) continue;  // a continuation byte: the lead is further back
    const size_t needed = byte >= 0xF0 && byte <= 0xF4   ? 4
                          : byte >= 0xE0 && byte <= 0xEF ? 3
                          : byte >= 0xC2 && byte <= 0xDF ? 2
                                                         : 1;
    return needed > back ? back : 0;
  }
  return 0;
}

}  // namespace

TerminalSafeStreambuf::TerminalSafeStreambuf(std::streambuf* destination)
    : destination_(destination) {}

TerminalSafeStreambuf::~TerminalSafeStreambuf() {
  std::lock_guard<std::mutex> lock(mutex_);
  WriteHeldLocked();
}

void TerminalSafeStreambuf::WriteControl(absl::string_view bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  WriteHeldLocked();
  destination_->sputn(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void TerminalSafeStreambuf::Finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  WriteHeldLocked();
  destination_->pubsync();
}

TerminalSafeStreambuf::int_type TerminalSafeStreambuf::overflow(int_type c) {
  if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
  const char byte = traits_type::to_char_type(c);
  Write(absl::string_view(&byte, 1));
  return c;
}

std::streamsize TerminalSafeStreambuf::xsputn(const char* data, std::streamsize size) {
  Write(absl::string_view(data, static_cast<size_t>(size)));
  return size;
}

int TerminalSafeStreambuf::sync() { return destination_->pubsync(); }

void TerminalSafeStreambuf::Write(absl::string_view bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string joined;
  if (!held_.empty()) {
    joined = held_ + std::string(bytes);
    held_.clear();
    bytes = joined;
  }
  if (std::all_of(bytes.begin(), bytes.end(), IsPlainByte)) {
    destination_->sputn(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return;
  }
  const size_t tail = IncompleteTail(bytes);
  held_.assign(bytes.data() + bytes.size() - tail, tail);
  bytes.remove_suffix(tail);
  // Newlines and tabs pass; every run between them is escaped.
  std::string out;
  out.reserve(bytes.size());
  while (!bytes.empty()) {
    const size_t end = std::min(bytes.find_first_of("\n\t"), bytes.size());
    out += EscapeForTerminal(bytes.substr(0, end));
    if (end < bytes.size()) out.push_back(bytes[end]);
    bytes.remove_prefix(std::min(end + 1, bytes.size()));
  }
  destination_->sputn(out.data(), static_cast<std::streamsize>(out.size()));
}

void TerminalSafeStreambuf::WriteHeldLocked() {
  if (held_.empty()) return;
  const std::string escaped = EscapeForTerminal(held_);
  held_.clear();
  destination_->sputn(escaped.data(), static_cast<std::streamsize>(escaped.size()));
}

void WriteTerminalControl(std::ostream& out, absl::string_view sequence) {
  if (auto* safe = dynamic_cast<TerminalSafeStreambuf*>(out.rdbuf()); safe != nullptr) {
    safe->WriteControl(sequence);
    return;
  }
  out.write(sequence.data(), static_cast<std::streamsize>(sequence.size()));
}

ScopedTerminalSafeOutput::ScopedTerminalSafeOutput(std::ostream& stream)
    : stream_(stream), filter_(stream.rdbuf()) {
  stream_.rdbuf(&filter_);
}

ScopedTerminalSafeOutput::~ScopedTerminalSafeOutput() {
  stream_.flush();
  stream_.rdbuf(filter_.destination());
  filter_.Finish();
}

}  // namespace gpuprof::client
