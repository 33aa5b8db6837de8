#include "client/report_command.h"

#include <filesystem>
#include <fstream>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/session.h"
#include "client/token_hash.h"
#include "common/byte_format.h"

namespace gpuprof::client {
namespace {

std::vector<FlagSpec> ReportFlags() {
  return {{.name = "output",
           .value_syntax = "PATH",
           .help = "where to write the report, -o for short; - for stdout (default: the name "
                   "the daemon gives it, ID.ncu-rep or ID.nsys-rep)"},
          {.name = "force", .is_switch = true, .help = "overwrite a file that exists"},
          TargetFlag(),
          HelpFlag()};
}

std::string OpenHint(const v1::CaptureReport& report, absl::string_view path) {
  if (report.tool() == v1::NsightCapture::TOOL_NSYS) {
    return absl::StrCat("open it with nsys-ui, or `nsys stats ", path, "`");
  }
  return absl::StrCat("open it with ncu-ui, or `ncu --import ", path, " --page details`");
}

int RunReport(Session& session, const ParsedArgs& args) {
  const std::string& id = args.positionals[0];
  v1::GetCaptureReportRequest request;
  request.set_experiment_id(id);
  std::string bytes;
  v1::CaptureReport report;
  while (true) {
    request.set_offset(static_cast<int64_t>(bytes.size()));
    v1::CaptureReportPage page;
    if (const int code =
            session.CallOrReport(&v1::Profiler::StubInterface::GetCaptureReport, request, page);
        code != kExitOk) {
      return code;
    }
    if (bytes.empty()) report = page.report();
    bytes += page.data();
    if (page.eof()) break;
    if (page.data().empty()) {
      session.err() << "error: the daemon sent an empty page of " << id << "'s report at byte "
                    << bytes.size() << " of " << report.size_bytes() << "\n";
      return kExitOtherError;
    }
  }
  if (static_cast<int64_t>(bytes.size()) != report.size_bytes() ||
      (!report.sha256().empty() && Sha256Hex(bytes) != report.sha256())) {
    session.err() << "error: " << id << "'s report arrived as " << bytes.size()
                  << " bytes that do not match its recorded size (" << report.size_bytes()
                  << ") or SHA-256; nothing written\n";
    return kExitOtherError;
  }
  const std::string path = args.Get("output").value_or(report.file_name());
  if (const absl::Status extension = CheckReportExtension(report, path); !extension.ok()) {
    return ReportUsageError(session.env(), extension.message(), "");
  }
  if (const absl::Status destination = CheckReportDestination(path, args.Has("force"));
      !destination.ok()) {
    return ReportUsageError(session.env(), destination.message(), "");
  }
  if (path == "-") {
    session.out().write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    session.out().flush();
    return kExitOk;
  }
  // Written beside its name and renamed: a reader never opens half a report.
  const std::string partial = path + ".partial";
  {
    std::ofstream file(partial, std::ios::binary | std::ios::trunc);
    file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    file.close();
    if (!file) {
      session.err() << "error: cannot write " << partial << "\n";
      std::error_code ignored;
      std::filesystem::remove(partial, ignored);
      return kExitOtherError;
    }
  }
  std::error_code error;
  std::filesystem::rename(partial, path, error);
  if (error) {
    session.err() << "error: moving " << partial << " to " << path << ": " << error.message()
                  << "\n";
    return kExitOtherError;
  }
  session.out() << DescribeWrittenReport(report, id, path);
  return kExitOk;
}

}  // namespace

std::string DescribeWrittenReport(const v1::CaptureReport& report, absl::string_view experiment_id,
                                  absl::string_view path) {
  return absl::StrCat(
      "wrote ", path, " (", FormatDecimalBytes(report.size_bytes()), ", ",
      report.tool() == v1::NsightCapture::TOOL_NSYS ? "nsys" : "ncu", " report of ",
      experiment_id, report.tool_version().empty() ? "" : absl::StrCat(", ", report.tool_version()),
      "); ", OpenHint(report, path), "\n");
}

absl::Status CheckReportExtension(const v1::CaptureReport& report, absl::string_view path) {
  const bool nsys = report.tool() == v1::NsightCapture::TOOL_NSYS;
  const absl::string_view wanted = nsys ? ".nsys-rep" : ".ncu-rep";
  const absl::string_view other = nsys ? ".ncu-rep" : ".nsys-rep";
  if (!absl::EndsWith(path, other)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "-o ", path, ": this is an ", nsys ? "nsys" : "ncu", " report; name the file ", wanted,
      " (", nsys ? "nsys-ui and nsys stats" : "ncu-ui and ncu --import",
      " go by the extension)"));
}

absl::Status CheckReportDestination(const std::string& path, bool force) {
  if (path == "-" || force) return absl::OkStatus();
  std::error_code error;
  if (std::filesystem::exists(path, error)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " exists; give --force to overwrite it, or another -o"));
  }
  return absl::OkStatus();
}

Command ReportCommand() {
  return {.name = "report",
          .usage = "report ID [-o FILE.ncu-rep|FILE.nsys-rep|-] [--force]",
          .summary = "fetch the Nsight report of an experiment submitted with --capture",
          .details =
              "Fetches the report ncu or nsys left for an experiment submitted with\n"
              "`--capture ncu|nsys` (its owner and admins), checks its size and SHA-256, and\n"
              "writes it (default: ID.ncu-rep or ID.nsys-rep; -o - for stdout). Open an ncu\n"
              "report with ncu-ui or `ncu --import FILE --page details`, an nsys report with\n"
              "nsys-ui or `nsys stats FILE` (docs/nsight.md).",
          .positionals = {"ID"},
          .flags = ReportFlags,
          .run = RunReport,
          .short_o_is_output = true};
}

}  // namespace gpuprof::client
