#include "client/connection_options.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/terminal_text.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace gpuprof::client {
namespace {

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Free {
  void operator()(X509* certificate) const { X509_free(certificate); }
};
struct KeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};

class CollectErrors : public google::protobuf::io::ErrorCollector {
 public:
  explicit CollectErrors(std::string origin) : origin_(std::move(origin)) {}
  void AddError(int line, int column, const std::string& message) override {
    errors_.push_back(absl::StrCat(origin_, ":", line + 1, ":", column + 1, ": ", message));
  }
  std::vector<std::string> errors_;

 private:
  std::string origin_;
};

std::string FormatAsn1Time(const ASN1_TIME* time) {
  std::unique_ptr<BIO, BioFree> bio(BIO_new(BIO_s_mem()));
  ASN1_TIME_print(bio.get(), time);
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

}  // namespace

std::string DefaultClientConfigPath() {
  if (const char* path = std::getenv("GPUPROF_CONFIG"); path != nullptr && *path != '\0') {
    return path;
  }
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg != nullptr && *xdg != '\0') {
    return absl::StrCat(xdg, "/gpuprof/config.textproto");
  }
  const char* home = std::getenv("HOME");
  return absl::StrCat(home == nullptr ? "" : home, "/.config/gpuprof/config.textproto");
}

absl::StatusOr<v1::ClientConfig> LoadClientConfig(const std::string& path) {
  v1::ClientConfig config;
  std::ifstream file(path);
  if (!file) return config;
  std::stringstream text;
  text << file.rdbuf();
  CollectErrors errors(path);
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text.str(), &config)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config file ", absl::StrJoin(errors.errors_, "; "),
        " (fields: target, tls_ca, tls_cert, tls_key, token_file)"));
  }
  return config;
}

absl::StatusOr<std::string> ReadFileForFlag(const std::string& path, const std::string& flag) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read ", path));
  }
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

absl::Status CheckHeaderValue(absl::string_view source, absl::string_view value, bool show_value) {
  for (size_t i = 0; i < value.size(); ++i) {
    const auto byte = static_cast<unsigned char>(value[i]);
    if (byte >= 0x20 && byte <= 0x7E) continue;
    const std::optional<UnsafeCharacter> unsafe = FindUnsafeCharacter(value.substr(i));
    const std::string what = unsafe.has_value() && unsafe->byte_offset == 0
                                 ? DescribeUnsafeCharacter(*unsafe)
                                 : absl::StrFormat("byte 0x%02X (not ASCII)", byte);
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s%s: %s at byte %d cannot be sent; it travels in a gRPC header, which carries printable "
        "ASCII only (0x20-0x7E)",
        source, show_value ? absl::StrCat(" \"", EscapeForTerminal(value), "\"") : "", what, i));
  }
  return absl::OkStatus();
}

absl::Status CheckConnectionOptions(const ConnectionOptions& options, absl::Time now) {
  if (!options.token.empty() && !options.tls()) {
    return absl::InvalidArgumentError(
        "--token: a bearer token is sent only over TLS (give --tls-ca); in plaintext anyone on "
        "the path could read and reuse it");
  }
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (!options.tls_cert.empty() && !options.tls()) {
    return absl::InvalidArgumentError(
        "--tls-cert: give --tls-ca too (the CA that signed the daemon's certificate)");
  }
  if (!options.tls()) return absl::OkStatus();
  auto ca = ReadFileForFlag(options.tls_ca, "--tls-ca");
  if (!ca.ok()) return ca.status();
  if (options.tls_cert.empty()) return absl::OkStatus();
  auto certificate_pem = ReadFileForFlag(options.tls_cert, "--tls-cert");
  if (!certificate_pem.ok()) return certificate_pem.status();
  auto key_pem = ReadFileForFlag(options.tls_key, "--tls-key");
  if (!key_pem.ok()) return key_pem.status();

  std::unique_ptr<BIO, BioFree> certificate_bio(
      BIO_new_mem_buf(certificate_pem->data(), static_cast<int>(certificate_pem->size())));
  std::unique_ptr<X509, X509Free> certificate(
      PEM_read_bio_X509(certificate_bio.get(), nullptr, nullptr, nullptr));
  if (certificate == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-cert: ", options.tls_cert, " holds no PEM certificate"));
  }
  const time_t unix_now = absl::ToTimeT(now);
  if (X509_cmp_time(X509_get0_notAfter(certificate.get()), const_cast<time_t*>(&unix_now)) < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--tls-cert: the client certificate ", options.tls_cert, " expired on ",
        FormatAsn1Time(X509_get0_notAfter(certificate.get())),
        "; the daemon refuses it. Ask for a new one signed by the daemon's client CA"));
  }
  if (X509_cmp_time(X509_get0_notBefore(certificate.get()), const_cast<time_t*>(&unix_now)) > 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--tls-cert: the client certificate ", options.tls_cert, " is not valid before ",
        FormatAsn1Time(X509_get0_notBefore(certificate.get()))));
  }
  std::unique_ptr<BIO, BioFree> key_bio(
      BIO_new_mem_buf(key_pem->data(), static_cast<int>(key_pem->size())));
  std::unique_ptr<EVP_PKEY, KeyFree> key(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (key == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls-key: ", options.tls_key, " holds no unencrypted PEM private key"));
  }
  if (X509_check_private_key(certificate.get(), key.get()) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("--tls-key: ", options.tls_key,
                                                   " is not the key of ", options.tls_cert));
  }
  return absl::OkStatus();
}

}  // namespace gpuprof::client
