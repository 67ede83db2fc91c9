#include "daemon/common/tls.h"

#include <gtest/gtest.h>

#include "tests/testing/certs.h"
#include "tests/testing/temp_dir.h"

namespace ringside::daemon {
namespace {

TEST(TlsTest, LoopbackAddresses) {
  for (const char* a : {"127.0.0.1:9472", "127.1.2.3:1", "localhost:9472", "[::1]:9472",
                        "localhost", "127.0.0.1"}) {
    EXPECT_TRUE(IsLoopbackAddress(a)) << a;
  }
  for (const char* a : {":9472", "0.0.0.0:9472", "[::]:9472", "10.0.0.5:9472",
                        "aggregator.example:9472", "192.168.1.1"}) {
    EXPECT_FALSE(IsLoopbackAddress(a)) << a;
  }
}

TEST(TlsTest, PlaintextOffLoopbackIsRefusedUnlessAllowed) {
  TlsOptions none;
  auto server = MakeServerCredentials(none, ":9472");
  ASSERT_FALSE(server.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(server.status()));
  EXPECT_NE(server.status().message().find("--allow-insecure"), std::string::npos);
  EXPECT_TRUE(MakeServerCredentials(none, "127.0.0.1:0").ok());
  auto client = MakeChannelCredentials(none, "10.1.2.3:9472");
  ASSERT_FALSE(client.ok());
  EXPECT_NE(client.status().message().find("refusing plaintext"), std::string::npos);
  EXPECT_TRUE(MakeChannelCredentials(none, "localhost:9472").ok());
  TlsOptions allow;
  allow.allow_insecure = true;
  EXPECT_TRUE(MakeServerCredentials(allow, ":9472").ok());
  EXPECT_TRUE(MakeChannelCredentials(allow, "10.1.2.3:9472").ok());
}

TEST(TlsTest, CertificatesAreCheckedAtStartup) {
  testing::TempDir dir;
  auto pki = testing::TestPki::Create(dir.path(), "ringside");
  ASSERT_TRUE(pki.ok()) << pki.status();
  auto server = pki->IssueServer("aggregator");
  ASSERT_TRUE(server.ok()) << server.status();
  TlsOptions tls{server->cert, server->key, pki->ca_cert()};
  EXPECT_TRUE(MakeServerCredentials(tls, ":9472").ok());
  TlsOptions missing{dir.path() + "/nope.pem", server->key, ""};
  auto bad = MakeServerCredentials(missing, ":9472");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("nope.pem"), std::string::npos);
  TlsOptions half{server->cert, "", ""};
  EXPECT_TRUE(absl::IsInvalidArgument(MakeServerCredentials(half, ":1").status()));
  TlsOptions not_pem{server->cert, dir.path() + "/aggregator.ext", ""};
  EXPECT_FALSE(MakeServerCredentials(not_pem, ":1").ok());
}

}  // namespace
}  // namespace ringside::daemon
