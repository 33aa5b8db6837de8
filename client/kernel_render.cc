#include "client/kernel_render.h"

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/table.h"
#include "common/byte_format.h"
#include "common/terminal_text.h"

namespace gpuprof::client {
namespace {

// The lines `sass` marks as hot: the most sampled ones, at most this many.
constexpr size_t kHottestLines = 5;

std::string ShortSha(absl::string_view sha256) { return std::string(sha256.substr(0, 12)); }

std::string Bytes(int64_t bytes) { return absl::StrCat(bytes, " B"); }

std::string DescribeCheck(const v1::Verification& check) {
  std::string text = check.passed() ? "passed" : "FAILED";
  if (!check.passed() && check.mismatches() > 0) {
    absl::StrAppend(&text, ", ", check.mismatches(), " mismatches");
  }
  if (!check.message().empty()) absl::StrAppend(&text, ": ", check.message());
  // What it was compared against is long and the same for every check: said for a failure.
  if (!check.passed() && !check.method().empty()) {
    absl::StrAppend(&text, " (", check.method(), ")");
  }
  return text;
}

void AddLines(TextTable& table, const std::string& key, absl::string_view text) {
  bool first = true;
  for (absl::string_view line : absl::StrSplit(absl::StripTrailingAsciiWhitespace(text), '\n')) {
    table.AddRow({first ? key : "", std::string(absl::StripSuffix(line, "\r"))});
    first = false;
  }
}

}  // namespace

bool HasCompilerError(absl::string_view text) {
  for (absl::string_view marker : {"): error", "): catastrophic error"}) {
    for (size_t at = text.find(marker); at != absl::string_view::npos;
         at = text.find(marker, at + 1)) {
      size_t digits = at;
      while (digits > 0 && absl::ascii_isdigit(static_cast<unsigned char>(text[digits - 1]))) {
        --digits;
      }
      if (digits == at || digits == 0 || text[digits - 1] != '(') continue;
      // A file name before the '(': at least one character that is not a space.
      if (digits >= 2 && !absl::ascii_isspace(static_cast<unsigned char>(text[digits - 2]))) {
        return true;
      }
    }
  }
  return false;
}

std::string KernelLabel(const v1::Experiment& experiment) {
  const v1::CustomKernel& kernel = experiment.request().custom_kernel();
  if (kernel.source().empty() && kernel.file_name().empty() &&
      !experiment.result().has_custom_kernel()) {
    return "ours";
  }
  const v1::CustomKernelResult& result = experiment.result().custom_kernel();
  const std::string name = !result.kernel_name().empty() ? result.kernel_name()
                                                         : kernel.kernel_name();
  std::string label = name.empty() ? "kernel" : name;
  if (!result.source_sha256().empty()) absl::StrAppend(&label, "@", ShortSha(result.source_sha256()));
  if (!kernel.file_name().empty()) absl::StrAppend(&label, " (", kernel.file_name(), ")");
  return label;
}

std::string RenderKernelBlock(const v1::Experiment& experiment, absl::string_view indent) {
  const v1::CustomKernel& request = experiment.request().custom_kernel();
  const bool has_result = experiment.result().has_custom_kernel();
  if (!experiment.request().has_custom_kernel() && !has_result) return "";
  const v1::CustomKernelResult& kernel = experiment.result().custom_kernel();
  TextTable table;
  const std::string name = !kernel.kernel_name().empty() ? kernel.kernel_name()
                                                         : request.kernel_name();
  table.AddRow({"name:", name.empty() ? "-" : name});
  table.AddRow({"file:", absl::StrCat(request.file_name().empty() ? "kernel.cu" : request.file_name(),
                                      request.source().empty()
                                          ? ""
                                          : absl::StrCat(" (", request.source().size(), " bytes)"))});
  if (!kernel.source_sha256().empty()) {
    table.AddRow({"sha256:", ShortSha(kernel.source_sha256())});
  }
  std::vector<std::string> options(request.compile_options().begin(),
                                   request.compile_options().end());
  std::string mode = "benchmark";
  switch (request.mode()) {
    case v1::CustomKernel::MODE_TEST: mode = "test"; break;
    case v1::CustomKernel::MODE_PROFILE: mode = "profile"; break;
    case v1::CustomKernel::MODE_SANITIZE:
      mode = absl::StrCat("sanitize (",
                          request.sanitizer_tool().empty() ? "memcheck" : request.sanitizer_tool(),
                          ")");
      break;
    default: break;
  }
  table.AddRow({"mode:", absl::StrCat(mode, options.empty() ? "" : ", options ",
                                      absl::StrJoin(options, " "))});
  const bool compiled = kernel.registers_per_thread() > 0;
  if (kernel.block_threads() > 0 || kernel.blocks() > 0) {
    table.AddRow({"launch:", absl::StrCat(kernel.block_threads(), " threads x ", kernel.blocks(),
                                          " blocks, ", Bytes(request.dynamic_shared_bytes()),
                                          " dynamic shared")});
  }
  if (compiled) {
    table.AddRow({"resources:",
                  absl::StrCat(kernel.registers_per_thread(), " registers, ",
                               Bytes(kernel.local_bytes_per_thread()), " spills (local)",
                               kernel.local_bytes_per_thread() > 0 ? " SPILLS" : "", ", ",
                               Bytes(kernel.static_shared_bytes()), " static shared")});
  }
  if (kernel.blocks_per_sm() > 0) {
    table.AddRow(
        {"occupancy:",
         absl::StrCat(kernel.blocks_per_sm(), " blocks/SM, ",
                      absl::StrFormat("%.1f%%", 100 * kernel.theoretical_occupancy()),
                      kernel.occupancy_limiter().empty()
                          ? ""
                          : absl::StrCat(" (limited by ", kernel.occupancy_limiter(), ")"))});
  }
  for (int i = 0; i < kernel.checks_size(); ++i) {
    const bool after_timing = i == kernel.checks_size() - 1 && kernel.checks_size() > 1 &&
                              request.mode() != v1::CustomKernel::MODE_TEST &&
                              request.mode() != v1::CustomKernel::MODE_SANITIZE;
    table.AddRow({i == 0 ? "checks:" : "",
                  absl::StrCat(after_timing ? "after timing" : absl::StrCat("input ", i + 1), ": ",
                               DescribeCheck(kernel.checks(i)))});
  }
  if (has_result && compiled) {
    table.AddRow({"guard bytes:", kernel.guard_bytes_overwritten() == 0
                                      ? "none overwritten"
                                      : absl::StrCat(kernel.guard_bytes_overwritten(),
                                                     " OVERWRITTEN (out-of-bounds writes)")});
  }
  if (request.mode() == v1::CustomKernel::MODE_SANITIZE && has_result) {
    table.AddRow({"sanitizer:", absl::StrCat(kernel.sanitizer_errors(), " errors")});
    if (!kernel.sanitizer_report().empty()) {
      // The summary: compute-sanitizer's last lines say what it found.
      std::vector<std::string> lines =
          absl::StrSplit(absl::StripTrailingAsciiWhitespace(kernel.sanitizer_report()), '\n');
      const size_t shown = std::min<size_t>(lines.size(), 8);
      for (size_t i = lines.size() - shown; i < lines.size(); ++i) table.AddRow({"", lines[i]});
    }
  }
  if (!kernel.compile_log().empty()) {
    AddLines(table, "compiler:", kernel.compile_log());
  } else if (experiment.state() == v1::FAILED && HasCompilerError(experiment.reason())) {
    // The worker's reason carries the compiler's messages: a line each, as written.
    AddLines(table, "compiler:", experiment.reason());
  }
  return absl::StrCat(indent, "kernel:\n", table.Render(absl::StrCat(indent, "  ")));
}

std::string KernelSummary(const v1::CustomKernelResult& kernel) {
  std::vector<std::string> parts;
  std::string name = kernel.kernel_name().empty() ? "kernel" : kernel.kernel_name();
  if (!kernel.source_sha256().empty()) absl::StrAppend(&name, "@", ShortSha(kernel.source_sha256()));
  parts.push_back(name);
  if (kernel.registers_per_thread() > 0) {
    parts.push_back(absl::StrCat(kernel.registers_per_thread(), " registers"));
    parts.push_back(absl::StrCat(Bytes(kernel.local_bytes_per_thread()), " spills"));
  } else {
    parts.push_back("not compiled");
  }
  if (kernel.blocks_per_sm() > 0) {
    parts.push_back(absl::StrCat(
        kernel.blocks_per_sm(), " blocks/SM (",
        absl::StrFormat("%.1f%%", 100 * kernel.theoretical_occupancy()),
        kernel.occupancy_limiter().empty() ? "" : ", limited by " + kernel.occupancy_limiter(),
        ")"));
  }
  if (kernel.checks_size() > 0) {
    int passed = 0;
    for (const v1::Verification& check : kernel.checks()) passed += check.passed() ? 1 : 0;
    parts.push_back(absl::StrCat("checks ", passed, "/", kernel.checks_size(), " passed"));
  }
  if (kernel.registers_per_thread() > 0) {
    parts.push_back(kernel.guard_bytes_overwritten() == 0
                        ? std::string("guard bytes intact")
                        : absl::StrCat(kernel.guard_bytes_overwritten(),
                                       " guard bytes OVERWRITTEN"));
  }
  if (!kernel.sanitizer_report().empty() || kernel.sanitizer_errors() > 0) {
    parts.push_back(absl::StrCat("sanitizer ", kernel.sanitizer_errors(), " errors"));
  }
  return absl::StrJoin(parts, ", ");
}

std::string RenderSass(const v1::ExperimentResult& result) {
  if (result.sass().empty()) return "";
  int64_t total_samples = 0;
  std::vector<int64_t> samples;
  bool any_source = false;
  for (const v1::SassLine& line : result.sass()) {
    total_samples += line.samples();
    samples.push_back(line.samples());
    any_source = any_source || !line.source_line().empty();
  }
  // The hottest lines: the kHottestLines most sampled (ties included).
  int64_t hot_floor = 0;
  if (total_samples > 0) {
    std::sort(samples.rbegin(), samples.rend());
    hot_floor = std::max<int64_t>(1, samples[std::min(samples.size(), kHottestLines) - 1]);
  }
  // The mark column only where there are samples to mark.
  std::vector<std::string> header = {"OFFSET", "INSTRUCTION"};
  if (total_samples > 0) header.insert(header.begin(), "");
  if (any_source) header.push_back("SOURCE");
  if (total_samples > 0) {
    header.push_back("SAMPLES");
    header.push_back("TOP STALL");
  }
  TextTable table(header);
  for (const v1::SassLine& line : result.sass()) {
    std::vector<std::string> cells = {absl::StrFormat("%04x", line.pc_offset()), line.text()};
    if (total_samples > 0) cells.insert(cells.begin(), line.samples() >= hot_floor ? ">" : "");
    if (any_source) cells.push_back(line.source_line());
    if (total_samples > 0) {
      cells.push_back(line.samples() == 0
                          ? ""
                          : absl::StrCat(line.samples(), absl::StrFormat(" (%.1f%%)",
                                                                         100.0 * line.samples() /
                                                                             total_samples)));
      cells.push_back(line.top_stall());
    }
    table.AddRow(std::move(cells));
  }
  std::string out = table.Render();
  if (total_samples > 0) {
    absl::StrAppend(&out, total_samples, " PC samples; '>' marks the ", kHottestLines,
                    " most sampled lines\n");
  }
  return out;
}

std::string NoSassReason(const v1::Experiment& experiment) {
  if (!experiment.request().has_custom_kernel()) {
    return absl::StrCat(experiment.id(),
                        " ran our kernel: SASS is shown for custom kernels (--kernel-file)");
  }
  if (!experiment.has_result()) {
    return absl::StrCat(experiment.id(), " has no result yet (",
                        experiment.state() == v1::QUEUED ? "queued" : "no result", ")");
  }
  for (const std::string& note : experiment.result().not_collected()) {
    const std::string lower = absl::AsciiStrToLower(note);
    if (absl::StrContains(lower, "sass") || absl::StrContains(lower, "disassembl")) {
      return absl::StrCat(experiment.id(), " has no SASS: ", note);
    }
  }
  if (experiment.result().custom_kernel().registers_per_thread() == 0) {
    return absl::StrCat(experiment.id(), " has no SASS: its kernel did not compile");
  }
  return absl::StrCat(experiment.id(), " has no SASS: the worker returned none");
}

}  // namespace gpuprof::client
