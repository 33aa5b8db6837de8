#include "daemon/server/tls_file_mirror.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/stat.h>

#include <ctime>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuprof::daemon {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Read(const std::string& path) {
  std::ifstream file(path);
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

// A PEM CRL revoking `serials`, signed by a fresh key (the mirror checks that CRLs parse, not
// who signed them: that is OpenSSL's at the handshake).
std::string MakeCrl(const std::vector<long>& serials) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509_CRL* crl = X509_CRL_new();
  X509_CRL_set_version(crl, 1);
  X509_NAME* issuer = X509_NAME_new();
  X509_NAME_add_entry_by_txt(issuer, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("test ca"), -1, -1, 0);
  X509_CRL_set_issuer_name(crl, issuer);
  ASN1_TIME* now = ASN1_TIME_set(nullptr, std::time(nullptr));
  ASN1_TIME* next = ASN1_TIME_set(nullptr, std::time(nullptr) + 86400);
  X509_CRL_set1_lastUpdate(crl, now);
  X509_CRL_set1_nextUpdate(crl, next);
  for (long serial : serials) {
    X509_REVOKED* revoked = X509_REVOKED_new();
    ASN1_INTEGER* number = ASN1_INTEGER_new();
    ASN1_INTEGER_set(number, serial);
    X509_REVOKED_set_serialNumber(revoked, number);
    X509_REVOKED_set_revocationDate(revoked, now);
    X509_CRL_add0_revoked(crl, revoked);
    ASN1_INTEGER_free(number);
  }
  X509_CRL_sort(crl);
  X509_CRL_sign(crl, key, EVP_sha256());
  BIO* out = BIO_new(BIO_s_mem());
  PEM_write_bio_X509_CRL(out, crl);
  char* data = nullptr;
  const long size = BIO_get_mem_data(out, &data);
  std::string pem(data, size);
  BIO_free(out);
  ASN1_TIME_free(now);
  ASN1_TIME_free(next);
  X509_NAME_free(issuer);
  X509_CRL_free(crl);
  EVP_PKEY_free(key);
  return pem;
}

class TlsFileMirrorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::string(getenv("TEST_TMPDIR")) + "/" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::create_directories(dir_);
    sources_ = {dir_ + "/server.pem", dir_ + "/server.key", dir_ + "/ca.pem"};
    std::ofstream(sources_.cert) << "cert 1";
    std::ofstream(sources_.key) << "key 1";
    std::ofstream(sources_.ca) << "ca 1";
  }
  std::string dir_;
  TlsFileMirror::Files sources_;
};

TEST_F(TlsFileMirrorTest, CopiesAtCreationAndOnlyWhatChangedOnRefresh) {
  auto mirror = TlsFileMirror::Create(sources_, dir_ + "/in-use");
  ASSERT_TRUE(mirror.ok()) << mirror.status();
  const TlsFileMirror::Files& copies = (*mirror)->copies();
  EXPECT_EQ(Read(copies.cert), "cert 1");
  EXPECT_EQ(Read(copies.key), "key 1");
  EXPECT_EQ(Read(copies.ca), "ca 1");
  struct stat key_stat {};
  ASSERT_EQ(stat(copies.key.c_str(), &key_stat), 0);
  EXPECT_EQ(key_stat.st_mode & 0777, 0600u);
  // Nothing changed: nothing copied.
  auto unchanged = (*mirror)->Refresh();
  ASSERT_TRUE(unchanged.ok());
  EXPECT_TRUE(unchanged->empty());
  // The configured files change; the copies follow only when asked.
  std::ofstream(sources_.cert) << "cert 2";
  std::ofstream(sources_.ca) << "ca 2";
  EXPECT_EQ(Read(copies.cert), "cert 1");
  auto changed = (*mirror)->Refresh();
  ASSERT_TRUE(changed.ok());
  EXPECT_THAT(*changed, ElementsAre(sources_.cert, sources_.ca));
  EXPECT_EQ(Read(copies.cert), "cert 2");
  EXPECT_EQ(Read(copies.key), "key 1");
  EXPECT_EQ(Read(copies.ca), "ca 2");
}

TEST_F(TlsFileMirrorTest, AnUnreadableSourceChangesNoCopy) {
  auto mirror = TlsFileMirror::Create(sources_, dir_ + "/in-use");
  ASSERT_TRUE(mirror.ok()) << mirror.status();
  std::ofstream(sources_.cert) << "cert 2";
  std::filesystem::remove(sources_.key);
  auto refused = (*mirror)->Refresh();
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr(sources_.key));
  EXPECT_EQ(Read((*mirror)->copies().cert), "cert 1");
}

TEST_F(TlsFileMirrorTest, CreationNamesAMissingFile) {
  std::filesystem::remove(sources_.ca);
  auto mirror = TlsFileMirror::Create(sources_, dir_ + "/in-use");
  ASSERT_FALSE(mirror.ok());
  EXPECT_THAT(mirror.status().message(), HasSubstr(sources_.ca));
}

class TlsFileMirrorCrlTest : public TlsFileMirrorTest {
 protected:
  void SetUp() override {
    TlsFileMirrorTest::SetUp();
    sources_.crl_dir = dir_ + "/crl";
    std::filesystem::create_directories(sources_.crl_dir);
    first_crl_ = MakeCrl({});
    // As openssl rehash leaves it: the CRL under its own name, a hashed symlink to it.
    std::ofstream(sources_.crl_dir + "/ca.crl.pem") << first_crl_;
    std::filesystem::create_symlink("ca.crl.pem", sources_.crl_dir + "/0123abcd.r0");
  }
  std::string first_crl_;
};

TEST_F(TlsFileMirrorCrlTest, CrlsAreMirroredAndTheCaCopyChangesWithThem) {
  auto mirror = TlsFileMirror::Create(sources_, dir_ + "/in-use");
  ASSERT_TRUE(mirror.ok()) << mirror.status();
  const TlsFileMirror::Files& copies = (*mirror)->copies();
  ASSERT_EQ(copies.crl_dir, dir_ + "/in-use/crl");
  // Only what OpenSSL's hashed lookup reads is copied.
  EXPECT_EQ(Read(copies.crl_dir + "/0123abcd.r0"), first_crl_);
  EXPECT_FALSE(std::filesystem::exists(copies.crl_dir + "/ca.crl.pem"));
  const std::string first_ca = Read(copies.ca);
  EXPECT_THAT(first_ca, ::testing::StartsWith("# gpuprofd: CRLs in use, sha256 "));
  EXPECT_THAT(first_ca, ::testing::EndsWith("\nca 1"));
  auto unchanged = (*mirror)->Refresh();
  ASSERT_TRUE(unchanged.ok()) << unchanged.status();
  EXPECT_TRUE(unchanged->empty());
  EXPECT_EQ(Read(copies.ca), first_ca);

  // A new CRL, written in place as `openssl ca -gencrl -out` does: copied, and the CA copy
  // changes (so gRPC builds a new context) while saying the same CA.
  const std::string second_crl = MakeCrl({0x1000});
  std::ofstream(sources_.crl_dir + "/ca.crl.pem") << second_crl;
  auto changed = (*mirror)->Refresh();
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_THAT(*changed, ElementsAre(sources_.crl_dir + "/0123abcd.r0"));
  EXPECT_EQ(Read(copies.crl_dir + "/0123abcd.r0"), second_crl);
  EXPECT_NE(Read(copies.ca), first_ca);
  EXPECT_THAT(Read(copies.ca), ::testing::EndsWith("\nca 1"));

  // A CRL renamed by a later rehash: the old name's copy goes.
  std::filesystem::rename(sources_.crl_dir + "/0123abcd.r0", sources_.crl_dir + "/0123abcd.r1");
  auto renamed = (*mirror)->Refresh();
  ASSERT_TRUE(renamed.ok()) << renamed.status();
  EXPECT_THAT(*renamed, ElementsAre(sources_.crl_dir + "/0123abcd.r1",
                                    sources_.crl_dir + "/0123abcd.r0 (removed)"));
  EXPECT_FALSE(std::filesystem::exists(copies.crl_dir + "/0123abcd.r0"));
}

TEST_F(TlsFileMirrorCrlTest, ACrlCutShortOrMissingKeepsTheOnesInUse) {
  auto mirror = TlsFileMirror::Create(sources_, dir_ + "/in-use");
  ASSERT_TRUE(mirror.ok()) << mirror.status();
  const TlsFileMirror::Files& copies = (*mirror)->copies();
  const std::string ca_in_use = Read(copies.ca);
  const std::string revoking = MakeCrl({0x1000, 0x1001});
  for (const std::string& damaged :
       {revoking.substr(0, revoking.size() / 2), std::string(), std::string("not a crl\n"),
        revoking + revoking.substr(0, 100)}) {
    std::ofstream(sources_.crl_dir + "/ca.crl.pem") << damaged;
    auto refused = (*mirror)->Refresh();
    ASSERT_FALSE(refused.ok()) << damaged;
    EXPECT_THAT(refused.status().message(), AllOf(HasSubstr(sources_.crl_dir + "/0123abcd.r0"),
                                                  HasSubstr("the CRLs in use stay")));
    EXPECT_EQ(Read(copies.crl_dir + "/0123abcd.r0"), first_crl_);
    EXPECT_EQ(Read(copies.ca), ca_in_use);
  }
  std::filesystem::remove(sources_.crl_dir + "/0123abcd.r0");
  auto emptied = (*mirror)->Refresh();
  ASSERT_FALSE(emptied.ok());
  EXPECT_THAT(emptied.status().message(), HasSubstr("holds no CRL named by hash"));
  EXPECT_EQ(Read(copies.crl_dir + "/0123abcd.r0"), first_crl_);
  // At start-up the same problems refuse to start.
  auto at_start = TlsFileMirror::Create(sources_, dir_ + "/in-use-2");
  ASSERT_FALSE(at_start.ok());
  EXPECT_THAT(at_start.status().message(), HasSubstr("holds no CRL named by hash"));
}

}  // namespace
}  // namespace gpuprof::daemon
