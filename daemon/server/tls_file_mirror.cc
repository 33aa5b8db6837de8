#include "daemon/server/tls_file_mirror.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

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

absl::Status MakePrivateDirectory(const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error || chmod(dir.c_str(), 0700) != 0) {
    return absl::InternalError(absl::StrCat(
        "cannot make ", dir,
        " for the TLS files in use: ", error ? error.message() : std::string(strerror(errno))));
  }
  return absl::OkStatus();
}

// What OpenSSL's hashed-directory lookup reads for CRLs: <subject hash, 8 hex digits>.r<N>.
bool IsHashedCrlName(const std::string& name) {
  if (name.size() < 11 || name[8] != '.' || name[9] != 'r') return false;
  for (size_t i = 0; i < 8; ++i) {
    if (!absl::ascii_isdigit(name[i]) && !(name[i] >= 'a' && name[i] <= 'f')) return false;
  }
  for (size_t i = 10; i < name.size(); ++i) {
    if (!absl::ascii_isdigit(name[i])) return false;
  }
  return true;
}

// Whether `contents` is one or more PEM CRLs and nothing cut short: a CRL that OpenSSL cannot
// read would make every certificate of its CA unverifiable, so it is refused before use.
absl::Status CheckPemCrls(const std::string& path, const std::string& contents) {
  BIO* bio = BIO_new_mem_buf(contents.data(), static_cast<int>(contents.size()));
  if (bio == nullptr) return absl::ResourceExhaustedError("out of memory reading a CRL");
  int count = 0;
  ERR_clear_error();
  while (X509_CRL* crl = PEM_read_bio_X509_CRL(bio, nullptr, nullptr, nullptr)) {
    X509_CRL_free(crl);
    ++count;
  }
  // The loop ends at the end of the text (no further BEGIN line) or at a damaged block.
  const unsigned long error = ERR_peek_last_error();
  const bool clean_end =
      ERR_GET_LIB(error) == ERR_LIB_PEM && ERR_GET_REASON(error) == PEM_R_NO_START_LINE;
  ERR_clear_error();
  BIO_free(bio);
  if (count == 0 || !clean_end) {
    return absl::InvalidArgumentError(
        absl::StrCat("CRL ", path, ": ",
                     count == 0 ? "holds no PEM CRL"
                                : "a PEM block after the first "
                                  "does not parse",
                     " (cut short, or not a CRL); the CRLs in use stay"));
  }
  return absl::OkStatus();
}

// name -> contents of the hashed CRLs in `dir` (symlinks followed), each checked.
absl::StatusOr<std::map<std::string, std::string>> ReadCrls(const std::string& dir) {
  std::map<std::string, std::string> crls;
  std::error_code error;
  std::filesystem::directory_iterator entries(dir, error);
  if (error) {
    return absl::NotFoundError(
        absl::StrCat("cannot read the CRL directory ", dir, ": ", error.message()));
  }
  for (const std::filesystem::directory_entry& entry : entries) {
    const std::string name = entry.path().filename().string();
    if (!IsHashedCrlName(name)) continue;
    auto contents = ReadWhole(entry.path().string());
    if (!contents.ok()) return contents.status();
    if (absl::Status parsed = CheckPemCrls(entry.path().string(), *contents); !parsed.ok()) {
      return parsed;
    }
    crls.emplace(name, *std::move(contents));
  }
  if (crls.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the CRL directory ", dir,
        " holds no CRL named by hash (<hash>.r0: run openssl rehash on it); with none, every "
        "client certificate would be refused, so the CRLs in use stay"));
  }
  return crls;
}

// The first line of the CA copy: changes exactly when the CRLs do (see the header).
std::string CrlMarker(const std::map<std::string, std::string>& crls) {
  std::string all;  // each name and file, length-prefixed
  for (const auto& [name, contents] : crls) {
    absl::StrAppend(&all, name.size(), ":", name, contents.size(), ":", contents);
  }
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(all.data()), all.size(), digest);
  std::string hex;
  for (unsigned char byte : digest) absl::StrAppendFormat(&hex, "%02x", byte);
  return absl::StrCat("# gpuprofd: CRLs in use, sha256 ", hex, "\n");
}

}  // namespace

absl::StatusOr<std::unique_ptr<TlsFileMirror>> TlsFileMirror::Create(Files sources,
                                                                     std::string dir) {
  if (absl::Status made = MakePrivateDirectory(dir); !made.ok()) return made;
  Files copies{dir + "/cert.pem", dir + "/key.pem", dir + "/client_ca.pem"};
  std::error_code error;
  // Copies left by an earlier run are replaced whatever they hold.
  for (const std::string& stale : {copies.cert, copies.key, copies.ca}) {
    std::filesystem::remove(stale, error);
  }
  std::filesystem::remove_all(dir + "/crl", error);
  if (!sources.crl_dir.empty()) {
    copies.crl_dir = dir + "/crl";
    if (absl::Status made = MakePrivateDirectory(copies.crl_dir); !made.ok()) return made;
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
  std::map<std::string, std::string> crls;
  if (!sources_.crl_dir.empty()) {
    auto read = ReadCrls(sources_.crl_dir);
    if (!read.ok()) return read.status();
    crls = *std::move(read);
    contents[2] = CrlMarker(crls) + contents[2];
  }
  std::vector<std::string> copied;
  // CRLs first: the CA copy, written last, is what makes gRPC build a context that reads them.
  if (!sources_.crl_dir.empty()) {
    for (const auto& [name, crl] : crls) {
      const std::string copy = copies_.crl_dir + "/" + name;
      const absl::StatusOr<std::string> current = ReadWhole(copy);
      if (current.ok() && *current == crl) continue;
      if (absl::Status written = WriteAtomically(copy, crl); !written.ok()) return written;
      copied.push_back(sources_.crl_dir + "/" + name);
    }
    std::error_code error;
    std::vector<std::string> gone;
    for (const auto& entry : std::filesystem::directory_iterator(copies_.crl_dir, error)) {
      const std::string name = entry.path().filename().string();
      if (!crls.contains(name)) gone.push_back(name);
    }
    for (const std::string& name : gone) {
      std::filesystem::remove(copies_.crl_dir + "/" + name, error);
      copied.push_back(absl::StrCat(sources_.crl_dir, "/", name, " (removed)"));
    }
  }
  for (size_t i = 0; i < contents.size(); ++i) {
    const auto& [source, copy] = pairs[i];
    const absl::StatusOr<std::string> current = ReadWhole(*copy);
    if (current.ok() && *current == contents[i]) continue;
    if (absl::Status written = WriteAtomically(*copy, contents[i]); !written.ok()) return written;
    // A CA copy rewritten only for its CRL line is not news about the CA file.
    if (i == 2 && current.ok() && !sources_.crl_dir.empty() &&
        current->substr(current->find('\n') + 1) ==
            contents[i].substr(contents[i].find('\n') + 1)) {
      continue;
    }
    copied.push_back(*source);
  }
  return copied;
}

}  // namespace gpuprof::daemon
