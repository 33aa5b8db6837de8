// Certificates for end-to-end tests of mutual TLS, made by the openssl command in a directory
// of the test's: two CAs, server certificates for localhost, client certificates whose CN is
// the user, an expired one, and an `openssl ca` database to revoke certificates and publish
// CRLs. Plus the small file and port helpers those tests share.
#ifndef GPUPROF_TESTS_TESTING_TLS_FIXTURE_H_
#define GPUPROF_TESTS_TESTING_TLS_FIXTURE_H_

#include <memory>
#include <string>
#include <vector>

#include "grpcpp/security/credentials.h"
#include "tests/testing/daemon_harness.h"

namespace gpuprof::testing {

std::string ReadFile(const std::string& path);
// Written beside and renamed, so a reader never sees half a file.
void WriteFile(const std::string& path, const std::string& contents);

// Two CAs (ca1, ca2); a server certificate for localhost from each (server1, server2); client
// certificates (CN = user) alice, bob, carol and dave from ca1, mallory from ca2, and an
// expired one, old, from ca1. ca1 has an `openssl ca` database (ca.cnf) for revocations.
class Certificates {
 public:
  // Fails the test (gtest) when openssl fails.
  static Certificates Make(const std::string& dir);

  std::string Path(const std::string& name, const std::string& extension) const;
  // CLI flags to connect as `user` with the daemon's CA `ca`.
  std::vector<std::string> ClientFlags(const std::string& user,
                                       const std::string& ca = "ca1") const;
  std::shared_ptr<grpc::ChannelCredentials> Credentials(const std::string& user,
                                                        const std::string& ca = "ca1") const;

  // ca1 revokes each of `users` (none: a CRL that revokes nobody) and publishes its CRL as
  // `crl_dir`/ca1.crl.pem, written in place as `openssl ca -gencrl -out` does, with the hashed
  // name OpenSSL looks up (openssl rehash). The output of openssl on failure.
  CommandResult PublishCrl(const std::string& crl_dir, const std::vector<std::string>& users);

 private:
  explicit Certificates(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
};

}  // namespace gpuprof::testing

#endif  // GPUPROF_TESTS_TESTING_TLS_FIXTURE_H_
