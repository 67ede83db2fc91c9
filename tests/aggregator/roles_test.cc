// Roles on the aggregator's gRPC port (daemon/common/grpc_roles.h, docs/http-security.md): an
// agent certificate may only ingest (as its own node) and gets PERMISSION_DENIED on the Query API;
// a reader certificate reads and cannot open an ingest stream; a token reads and only reads; a
// client with neither is UNAUTHENTICATED. And a renewed server certificate is served to new
// connections without a restart, while a stream opened before goes on.
#include <gtest/gtest.h>
#include <stdio.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "daemon/aggregator/aggregator.h"
#include "daemon/aggregator/query/query_api.h"
#include "daemon/aggregator/shards/shard_watch.h"
#include "daemon/common/grpc_roles.h"
#include "daemon/common/tls.h"
#include "daemon/ctl/query_client.h"
#include "grpcpp/create_channel.h"
#include "ringside/v1/query.grpc.pb.h"
#include "tests/aggregator/ingest/ingest_test_util.h"
#include "tests/testing/certs.h"
#include "tests/testing/process.h"
#include "tests/testing/temp_dir.h"

namespace ringside::daemon {
namespace {

void Deadline(grpc::ClientContext& ctx, absl::Duration d) {
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + d));
}

constexpr char kToken[] = "read-only-token-0123456789abcdef";

void Replace(const std::string& from, const std::string& to) {
  std::ifstream in(from, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string tmp = to + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    out << ss.str();
  }
  ASSERT_EQ(rename(tmp.c_str(), to.c_str()), 0);
}

class RolesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pki = testing::TestPki::Create(dir_.path(), "fleet");
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = std::make_unique<testing::TestPki>(*pki);
    auto server = pki_->IssueServer("aggregator");
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *server;
    auto agent = pki_->IssueClient("gpu-node-1");
    ASSERT_TRUE(agent.ok()) << agent.status();
    agent_ = *agent;
    auto reader = pki_->IssueClient("oncall");
    ASSERT_TRUE(reader.ok()) << reader.status();
    reader_ = *reader;
    token_file_ = dir_.path() + "/tokens";
    std::ofstream(token_file_) << "# read-only tokens\n" << kToken << "\n";

    RoleOptions ro;
    ro.enforce = true;
    ro.reader_identities = {"oncall", "ringside-aggregator-*"};
    ro.reader_token_file = token_file_;
    auto roles = RoleAuthorizer::Create(ro);
    ASSERT_TRUE(roles.ok()) << roles.status();
    AggregatorOptions o;
    o.listen = "127.0.0.1:0";
    o.http_listen = "";
    o.tls = TlsOptions{server_.cert, server_.key, pki_->ca_cert()};
    o.tls.client_cert_optional = true;  // token readers come without a certificate
    o.tls.refresh_interval_s = 1;
    o.roles = *roles;
    o.log = [](const std::string&) {};
    QueryServiceOptions qo;
    qo.roles = *roles;
    InstallQueryApi(o, nullptr, qo);
    auto agg = Aggregator::Start(o);
    ASSERT_TRUE(agg.ok()) << agg.status();
    agg_ = std::move(*agg);
    target_ = absl::StrCat("127.0.0.1:", agg_->grpc_port());
  }
  void TearDown() override {
    if (agg_) agg_->Shutdown();
  }

  std::shared_ptr<grpc::Channel> Channel(const testing::CertPaths* cert,
                                         const std::string& token_file = "") {
    TlsOptions tls;
    tls.ca_file = pki_->ca_cert();
    if (cert != nullptr) {
      tls.cert_file = cert->cert;
      tls.key_file = cert->key;
    }
    tls.token_file = token_file;
    auto creds = MakeChannelCredentials(tls, target_);
    EXPECT_TRUE(creds.ok()) << creds.status();
    return grpc::CreateChannel(target_, *creds);
  }

  grpc::Status List(const std::shared_ptr<grpc::Channel>& ch) {
    grpc::ClientContext ctx;
    Deadline(ctx, absl::Seconds(10));
    v1::ListIncidentsResponse r;
    return v1::Query::NewStub(ch)->ListIncidents(&ctx, {}, &r);
  }

  // Opens an ingest stream and says Hello as `node`: OK when a HelloAck comes back.
  grpc::Status Hello(const std::shared_ptr<grpc::Channel>& ch, const std::string& node) {
    auto stub = v1::Ingest::NewStub(ch);
    grpc::ClientContext ctx;
    Deadline(ctx, absl::Seconds(10));
    auto stream = stub->Stream(&ctx);
    stream->Write(testing::HelloMsg(node, 7));
    v1::AggregatorMessage reply;
    if (stream->Read(&reply) && reply.has_hello_ack()) {
      ctx.TryCancel();
      (void)stream->Finish();
      return grpc::Status::OK;
    }
    stream->WritesDone();
    return stream->Finish();
  }

  std::string ServedSerial() {
    testing::RunResult r = testing::Run(
        {"sh", "-c",
         absl::StrCat("openssl s_client -alpn h2 -connect ", target_, " -cert ", reader_.cert, " -key ",
                      reader_.key, " </dev/null 2>/dev/null | openssl x509 -noout -serial")},
        "", absl::Seconds(20));
    return std::string(absl::StripAsciiWhitespace(r.out));
  }

  testing::TempDir dir_;
  std::unique_ptr<testing::TestPki> pki_;
  testing::CertPaths server_, agent_, reader_;
  std::string token_file_, target_;
  std::unique_ptr<Aggregator> agg_;
};

TEST_F(RolesTest, AgentCertificateIngestsButCannotRead) {
  auto ch = Channel(&agent_);
  EXPECT_TRUE(Hello(ch, "gpu-node-1").ok());
  grpc::Status read = List(ch);
  EXPECT_EQ(read.error_code(), grpc::StatusCode::PERMISSION_DENIED) << read.error_message();
  EXPECT_TRUE(absl::StrContains(read.error_message(), "gpu-node-1 has no reader role"))
      << read.error_message();
  // Still only as its own node.
  EXPECT_EQ(Hello(ch, "gpu-node-2").error_code(), grpc::StatusCode::PERMISSION_DENIED);
}

TEST_F(RolesTest, ReaderCertificateReadsButCannotIngest) {
  auto ch = Channel(&reader_);
  EXPECT_TRUE(List(ch).ok());
  grpc::Status ingest = Hello(ch, "oncall");
  EXPECT_EQ(ingest.error_code(), grpc::StatusCode::PERMISSION_DENIED) << ingest.error_message();
  EXPECT_TRUE(absl::StrContains(ingest.error_message(), "reader role and may not ingest"))
      << ingest.error_message();
}

TEST_F(RolesTest, TokenReadsOnly) {
  auto ch = Channel(nullptr, token_file_);
  grpc::Status read = List(ch);
  EXPECT_TRUE(read.ok()) << read.error_message();
  grpc::Status ingest = Hello(ch, "gpu-node-1");
  EXPECT_EQ(ingest.error_code(), grpc::StatusCode::UNAUTHENTICATED) << ingest.error_message();

  const std::string bad = dir_.path() + "/bad-token";
  std::ofstream(bad) << "not-the-token-0123456789\n";
  grpc::Status wrong = List(Channel(nullptr, bad));
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED) << wrong.error_message();
  grpc::Status none = List(Channel(nullptr));
  EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED) << none.error_message();
  EXPECT_TRUE(absl::StrContains(none.error_message(), "reader identity")) << none.error_message();
  // A token removed from the file stops working without a restart.
  std::ofstream(token_file_) << "another-token-0123456789abcdef\n";
  EXPECT_EQ(List(ch).error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

// The CLI's --token-file: the token reads; without it (and without a reader certificate) the
// CLI says what to give.
TEST_F(RolesTest, CliReadsWithATokenFile) {
  ctl::ConnectionOptions c;
  c.target = target_;
  c.tls.ca_file = pki_->ca_cert();
  c.tls.token_file = token_file_;
  auto client = ctl::QueryClient::Connect(c);
  ASSERT_TRUE(client.ok()) << client.status();
  auto listed = (*client)->ListIncidents({});
  EXPECT_TRUE(listed.ok()) << listed.status();
  c.tls.token_file.clear();
  auto anonymous = ctl::QueryClient::Connect(c);
  ASSERT_TRUE(anonymous.ok()) << anonymous.status();
  auto refused = (*anonymous)->ListIncidents({});
  EXPECT_FALSE(refused.ok());
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "--token-file"))
      << refused.status();
}

// Cross-shard watching presents the aggregator's own certificate: with its name among the
// reader identities, the other shard's incidents stream; an agent's certificate is refused.
TEST_F(RolesTest, ShardWatchNeedsTheReaderRole) {
  auto peer_agg = pki_->IssueClient("ringside-aggregator-b-0");
  ASSERT_TRUE(peer_agg.ok()) << peer_agg.status();
  for (const testing::CertPaths* cert : {&*peer_agg, &agent_}) {
    ShardWatchOptions o;
    o.shards = {analysis::Shard{"shard-1", {target_}}};
    o.tls = TlsOptions{cert->cert, cert->key, pki_->ca_cert()};
    o.backoff_initial = absl::Milliseconds(50);
    o.backoff_max = absl::Milliseconds(200);
    o.log = [](const std::string&) {};
    auto watch = ShardWatch::Start(o, ShardWatchSink{[](auto&&...) {}, [](auto&&...) {}});
    bool connected = false;
    uint64_t failures = 0;
    for (int i = 0; i < 40 && !connected && failures < 2; ++i) {
      absl::SleepFor(absl::Milliseconds(100));
      for (const ShardWatch::ShardState& st : watch->states()) {
        connected = st.connected;
        failures = st.failures;
      }
    }
    if (cert == &agent_) {
      EXPECT_FALSE(connected) << "an agent certificate watched another shard";
      EXPECT_GE(failures, 1u);
    } else {
      EXPECT_TRUE(connected) << "the aggregator's certificate could not watch";
    }
  }
}

TEST_F(RolesTest, RenewedServerCertificateServesNewConnectionsWhileOldStreamsGoOn) {
  auto old_channel = Channel(&reader_);
  ASSERT_TRUE(List(old_channel).ok());
  grpc::ClientContext watch_ctx;
  Deadline(watch_ctx, absl::Seconds(30));
  auto watch = v1::Query::NewStub(old_channel)->WatchIncidents(&watch_ctx, {});

  const std::string before = ServedSerial();
  ASSERT_TRUE(absl::StartsWith(before, "serial=")) << before;
  auto renewed = pki_->IssueServer("aggregator-renewed");
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  Replace(renewed->key, server_.key);
  Replace(renewed->cert, server_.cert);
  std::string after = before;
  for (int i = 0; i < 40 && after == before; ++i) {  // the provider looks every 1 s here
    absl::SleepFor(absl::Milliseconds(250));
    after = ServedSerial();
  }
  EXPECT_TRUE(absl::StartsWith(after, "serial=")) << after;
  EXPECT_NE(after, before) << "the renewed certificate was not served";
  EXPECT_TRUE(List(Channel(&reader_)).ok());  // a new connection verifies the renewed one
  // The stream opened before the renewal is still there, and so is its connection.
  EXPECT_TRUE(List(old_channel).ok());
  watch_ctx.TryCancel();
  v1::IncidentChange c;
  while (watch->Read(&c)) {
  }
  EXPECT_EQ(watch->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

}  // namespace
}  // namespace ringside::daemon
