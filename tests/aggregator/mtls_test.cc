// mTLS between agents and the aggregator, with certificates this test makes: a valid agent
// streams; one without a certificate, one with a certificate from another CA, and one claiming
// another node's name are refused. (The plaintext policy off loopback is covered by
// tls_test and aggregator_process_test.)
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/aggregator/aggregator.h"
#include "daemon/common/tls.h"
#include "tests/aggregator/ingest/ingest_test_util.h"
#include "tests/testing/certs.h"
#include "tests/testing/temp_dir.h"

namespace ringside::daemon {
namespace {

class MtlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pki = testing::TestPki::Create(dir_.path(), "fleet");
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = std::make_unique<testing::TestPki>(*pki);
    auto other = testing::TestPki::Create(dir_.path(), "rogue");
    ASSERT_TRUE(other.ok()) << other.status();
    other_ = std::make_unique<testing::TestPki>(*other);
    auto server = pki_->IssueServer("aggregator");
    ASSERT_TRUE(server.ok()) << server.status();
    AggregatorOptions o;
    o.listen = "127.0.0.1:0";
    o.http_listen = "";
    o.tls = TlsOptions{server->cert, server->key, pki_->ca_cert()};
    o.log = [](const std::string&) {};
    auto agg = Aggregator::Start(o);
    ASSERT_TRUE(agg.ok()) << agg.status();
    agg_ = std::move(*agg);
  }

  // Opens a stream as `cert` (or with no client certificate), says Hello as `node`, and returns
  // the status the stream ended with, or OK if a HelloAck came back.
  grpc::Status HelloAs(const std::string& node, const testing::CertPaths* cert) {
    TlsOptions tls;
    tls.ca_file = pki_->ca_cert();
    if (cert != nullptr) {
      tls.cert_file = cert->cert;
      tls.key_file = cert->key;
    }
    auto creds = MakeChannelCredentials(tls, absl::StrCat("127.0.0.1:", agg_->grpc_port()));
    EXPECT_TRUE(creds.ok()) << creds.status();
    auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", agg_->grpc_port()), *creds);
    auto stub = v1::Ingest::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(15)));
    auto stream = stub->Stream(&ctx);
    stream->Write(testing::HelloMsg(node, 42));
    v1::AggregatorMessage reply;
    if (stream->Read(&reply) && reply.has_hello_ack()) {
      ctx.TryCancel();
      (void)stream->Finish();
      return grpc::Status::OK;
    }
    stream->WritesDone();
    return stream->Finish();
  }

  testing::TempDir dir_;
  std::unique_ptr<testing::TestPki> pki_;
  std::unique_ptr<testing::TestPki> other_;
  std::unique_ptr<Aggregator> agg_;
};

TEST_F(MtlsTest, ValidAgentStreams) {
  auto cert = pki_->IssueClient("gpu-node-1");
  ASSERT_TRUE(cert.ok()) << cert.status();
  EXPECT_TRUE(HelloAs("gpu-node-1", &*cert).ok());
}

TEST_F(MtlsTest, AgentWithoutCertificateIsRefused) {
  grpc::Status s = HelloAs("gpu-node-1", nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
}

TEST_F(MtlsTest, CertificateFromAnotherCaIsRefused) {
  auto cert = other_->IssueClient("gpu-node-1");
  ASSERT_TRUE(cert.ok()) << cert.status();
  grpc::Status s = HelloAs("gpu-node-1", &*cert);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
}

TEST_F(MtlsTest, ClaimingAnotherNodesNameIsRefused) {
  auto cert = pki_->IssueClient("gpu-node-1");
  ASSERT_TRUE(cert.ok()) << cert.status();
  grpc::Status s = HelloAs("gpu-node-2", &*cert);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_NE(s.error_message().find("gpu-node-2"), std::string::npos) << s.error_message();
}

}  // namespace
}  // namespace ringside::daemon
