#include "daemon/tls_file_mirror.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"

namespace gpuprof::daemon {
namespace {

absl::StatusOr<std::string> ReadWhole(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return absl::NotFoundError(absl::StrCat("cannot read TLS file ", path, ": ", strerror(errno)));
  }
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

absl::Status WriteAtomically(const std::string& path, const std::string& contents) {
  const std::string temporary = path + ".new";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    file << contents;
    file.flush();
    if (!file) return absl::InternalError(absl::StrCat("cannot write ", temporary));
  }
  chmod(temporary.c_str(), 0600);
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot replace ", path, ": ", error.message()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<TlsFileMirror>> TlsFileMirror::Create(Files sources,
                                                                     std::string dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error || chmod(dir.c_str(), 0700) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot make ", dir, " for the TLS files in use: ",
                     error ? error.message() : std::string(strerror(errno))));
  }
  Files copies{dir + "/cert.pem", dir + "/key.pem", dir + "/client_ca.pem"};
  // Copies left by an earlier run are replaced whatever they hold.
  for (const std::string& stale : {copies.cert, copies.key, copies.ca}) {
    std::filesystem::remove(stale, error);
  }
  auto mirror =
      std::unique_ptr<TlsFileMirror>(new TlsFileMirror(std::move(sources), std::move(copies)));
  if (auto copied = mirror->Refresh(); !copied.ok()) return copied.status();
  return mirror;
}

absl::StatusOr<std::vector<std::string>> TlsFileMirror::Refresh() {
  absl::MutexLock lock(&mutex_);
  const std::pair<const std::string*, const std::string*> pairs[] = {
      {&sources_.cert, &copies_.cert}, {&sources_.key, &copies_.key}, {&sources_.ca, &copies_.ca}};
  // Read every source first, so that an unreadable one changes nothing.
  std::vector<std::string> contents;
  for (const auto& [source, copy] : pairs) {
    auto read = ReadWhole(*source);
    if (!read.ok()) return read.status();
    if (read->empty()) {
      return absl::InvalidArgumentError(absl::StrCat("TLS file ", *source, " is empty"));
    }
    contents.push_back(*std::move(read));
  }
  std::vector<std::string> copied;
  for (size_t i = 0; i < contents.size(); ++i) {
    const auto& [source, copy] = pairs[i];
    const absl::StatusOr<std::string> current = ReadWhole(*copy);
    if (current.ok() && *current == contents[i]) continue;
    if (absl::Status written = WriteAtomically(*copy, contents[i]); !written.ok()) return written;
    copied.push_back(*source);
  }
  return copied;
}

}  // namespace gpuprof::daemon
