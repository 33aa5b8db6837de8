#include "tests/testing/tls_fixture.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "grpcpp/security/credentials.h"

namespace gpuprof::testing {

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream(path + ".new") << contents;
  std::filesystem::rename(path + ".new", path);
}

Certificates Certificates::Make(const std::string& dir) {
  const std::string script = absl::StrReplaceAll(R"sh(
set -e
cd DIR
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key" 2>/dev/null; }
for ca in ca1 ca2; do
  key $ca
  openssl req -x509 -new -key $ca.key -out $ca.pem -days 30 -subj "/CN=gpuprof test $ca"
done
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' > server.ext
printf 'extendedKeyUsage=clientAuth\n' > client.ext
leaf() {  # name ca extfile
  key $1
  openssl req -new -key $1.key -out $1.csr -subj "/CN=$1"
  openssl x509 -req -in $1.csr -CA $2.pem -CAkey $2.key -CAcreateserial -out $1.pem -days 30 \
    -extfile $3 2>/dev/null
}
leaf server1 ca1 server.ext
leaf server2 ca2 server.ext
for user in alice bob carol dave; do leaf $user ca1 client.ext; done
leaf mallory ca2 client.ext
# An expired certificate needs explicit dates, which only `openssl ca` sets.
key old
openssl req -new -key old.key -out old.csr -subj "/CN=old"
mkdir -p issued && : > index.txt && echo 1000 > serial && echo 01 > crlnumber
cat > ca.cnf <<EOF
[ ca ]
default_ca = test_ca
[ test_ca ]
database = DIR/index.txt
new_certs_dir = DIR/issued
serial = DIR/serial
default_md = sha256
policy = any_name
crlnumber = DIR/crlnumber
default_crl_days = 30
[ any_name ]
commonName = supplied
EOF
openssl ca -batch -config ca.cnf -cert ca1.pem -keyfile ca1.key -in old.csr -out old.pem \
  -startdate 20200101000000Z -enddate 20200102000000Z -notext 2>/dev/null
)sh",
                                                 {{"DIR", dir}});
  const CommandResult made = RunCommand({"/bin/sh", "-c", script});
  EXPECT_EQ(made.exit_code, 0) << made.err;
  return Certificates(dir);
}

std::string Certificates::Path(const std::string& name, const std::string& extension) const {
  return absl::StrCat(dir_, "/", name, ".", extension);
}

std::vector<std::string> Certificates::ClientFlags(const std::string& user,
                                                   const std::string& ca) const {
  return {"--tls-ca",        Path(ca, "pem"), "--tls-cert",
          Path(user, "pem"), "--tls-key",     Path(user, "key")};
}

std::shared_ptr<grpc::ChannelCredentials> Certificates::Credentials(const std::string& user,
                                                                    const std::string& ca) const {
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = ReadFile(Path(ca, "pem"));
  if (!user.empty()) {
    options.pem_cert_chain = ReadFile(Path(user, "pem"));
    options.pem_private_key = ReadFile(Path(user, "key"));
  }
  return grpc::SslCredentials(options);
}

CommandResult Certificates::PublishCrl(const std::string& crl_dir,
                                       const std::vector<std::string>& users) {
  std::string revocations;
  for (const std::string& user : users) {
    absl::StrAppend(&revocations, "openssl ca -config ca.cnf -cert ca1.pem -keyfile ca1.key ",
                    "-revoke ", user, ".pem 2>&1\n");
  }
  const std::string script =
      absl::StrReplaceAll(R"sh(
set -e
cd DIR
REVOKE
mkdir -p CRL_DIR
openssl ca -config ca.cnf -cert ca1.pem -keyfile ca1.key -gencrl -out CRL_DIR/ca1.crl.pem 2>&1
openssl rehash CRL_DIR
)sh",
                          {{"DIR", dir_}, {"REVOKE", revocations}, {"CRL_DIR", crl_dir}});
  return RunCommand({"/bin/sh", "-c", script});
}

}  // namespace gpuprof::testing
