// CallWithReconnect (daemon/common/grpc_retry.h): a read-only call that could not connect is sent
// once more, waiting for the channel's reconnect, and a server that stays down costs no more than
// the wait and is reported by its first error. On loopback against the fake Query service.
#include "daemon/common/grpc_retry.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/server_builder.h"
#include "ringside/v1/query.grpc.pb.h"
#include "tests/daemon/ctl/fake_query_service.h"

namespace ringside::daemon {
namespace {

// A loopback port nothing listens on (bound, then closed; never connected, so no TIME_WAIT).
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

std::unique_ptr<v1::Query::Stub> StubFor(int port) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  return v1::Query::NewStub(grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                                      grpc::InsecureChannelCredentials(), args));
}

class GrpcRetryTest : public ::testing::Test {
 protected:
  std::unique_ptr<grpc::Server> Serve(int port) {
    grpc::ServerBuilder b;
    int bound = 0;
    b.AddListeningPort(absl::StrCat("127.0.0.1:", port), grpc::InsecureServerCredentials(), &bound);
    b.RegisterService(&service_);
    std::unique_ptr<grpc::Server> s = b.BuildAndStart();
    EXPECT_EQ(bound, port);
    return s;
  }
  testing::FakeQueryService service_{testing::CannedCluster(absl::Now())};
};

TEST_F(GrpcRetryTest, AServerThatIsUpAnswersTheFirstTry) {
  const int port = FreePort();
  ASSERT_GT(port, 0);
  std::unique_ptr<grpc::Server> server = Serve(port);
  std::unique_ptr<v1::Query::Stub> stub = StubFor(port);
  int tries = 0;
  v1::ClusterStatus resp;
  grpc::Status s = CallWithReconnect(absl::Now() + absl::Seconds(5), absl::Milliseconds(500),
                                     [&](grpc::ClientContext* ctx) {
                                       ++tries;
                                       return stub->GetStatus(ctx, v1::GetStatusRequest(), &resp);
                                     });
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(tries, 1);
  EXPECT_GT(resp.nodes(), 0u);
  server->Shutdown();
}

TEST_F(GrpcRetryTest, AServerThatComesUpBeforeTheReconnectAnswersTheSecondTry) {
  const int port = FreePort();
  ASSERT_GT(port, 0);
  std::unique_ptr<v1::Query::Stub> stub = StubFor(port);
  std::unique_ptr<grpc::Server> server;
  std::atomic<bool> up{false};
  int tries = 0;
  v1::ClusterStatus resp;
  std::thread starter;
  grpc::Status s = CallWithReconnect(absl::Now() + absl::Seconds(10), absl::Seconds(5),
                                     [&](grpc::ClientContext* ctx) {
                                       if (++tries == 2) {
                                         // The first try was refused; the server starts while the
                                         // second waits to connect.
                                         starter = std::thread([&] {
                                           server = Serve(port);
                                           up = true;
                                         });
                                       }
                                       return stub->GetStatus(ctx, v1::GetStatusRequest(), &resp);
                                     });
  if (starter.joinable()) starter.join();
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(tries, 2);
  EXPECT_TRUE(up);
  EXPECT_GT(resp.nodes(), 0u);
  if (server) server->Shutdown();
}

TEST_F(GrpcRetryTest, AServerThatStaysDownIsReportedByItsFirstErrorAfterTheWait) {
  const int port = FreePort();
  ASSERT_GT(port, 0);
  std::unique_ptr<v1::Query::Stub> stub = StubFor(port);
  int tries = 0;
  v1::ClusterStatus resp;
  const absl::Time start = absl::Now();
  grpc::Status s = CallWithReconnect(absl::Now() + absl::Seconds(10), absl::Milliseconds(500),
                                     [&](grpc::ClientContext* ctx) {
                                       ++tries;
                                       return stub->GetStatus(ctx, v1::GetStatusRequest(), &resp);
                                     });
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_EQ(tries, 2);
  // The wait bounds it: not the 10 s deadline (a generous bound for a loaded machine).
  EXPECT_LT(took, absl::Seconds(5)) << took;
  EXPECT_GE(took, absl::Milliseconds(400)) << took;
}

TEST_F(GrpcRetryTest, AnAnswerThatIsNotUnavailableIsNotSentAgain) {
  const int port = FreePort();
  ASSERT_GT(port, 0);
  std::unique_ptr<grpc::Server> server = Serve(port);
  std::unique_ptr<v1::Query::Stub> stub = StubFor(port);
  int tries = 0;
  v1::NodeStatus resp;
  v1::GetNodeRequest req;
  req.set_node("no-such-node");
  grpc::Status s = CallWithReconnect(absl::Now() + absl::Seconds(5), absl::Milliseconds(500),
                                     [&](grpc::ClientContext* ctx) {
                                       ++tries;
                                       return stub->GetNode(ctx, req, &resp);
                                     });
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  EXPECT_EQ(tries, 1);
  server->Shutdown();
}

}  // namespace
}  // namespace ringside::daemon
