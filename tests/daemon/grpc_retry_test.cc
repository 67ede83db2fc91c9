// CallWithReconnect (daemon/common/grpc_retry.h): a read-only call that could not connect is sent
// once more, waiting for the channel's reconnect, and a server that stays down costs no more than
// the wait and is reported by its first error. On loopback against the fake Query service.
#include "daemon/common/grpc_retry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/server_builder.h"
#include "ringside/v1/query.grpc.pb.h"
#include "tests/daemon/ctl/fake_query_service.h"
#include "tests/testing/port_reservation.h"
#include "tests/testing/temp_dir.h"

namespace ringside::daemon {
namespace {

std::unique_ptr<v1::Query::Stub> StubFor(int port) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  return v1::Query::NewStub(grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                                      grpc::InsecureChannelCredentials(), args));
}

class GrpcRetryTest : public ::testing::Test {
 protected:
  std::unique_ptr<grpc::Server> ServeOnAnyPort(int* port) {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), port);
    b.RegisterService(&service_);
    std::unique_ptr<grpc::Server> s = b.BuildAndStart();
    EXPECT_GT(*port, 0);
    return s;
  }
  testing::FakeQueryService service_{testing::CannedCluster(absl::Now())};
};

TEST_F(GrpcRetryTest, AServerThatIsUpAnswersTheFirstTry) {
  int port = 0;
  std::unique_ptr<grpc::Server> server = ServeOnAnyPort(&port);
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
  // A Unix socket that is not there yet: no port another test could be handed meanwhile.
  testing::TempDir dir;
  const std::string target = absl::StrCat("unix:", dir.path(), "/query.sock");
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  std::unique_ptr<v1::Query::Stub> stub = v1::Query::NewStub(
      grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
  std::unique_ptr<grpc::Server> server;
  std::atomic<bool> up{false};
  int tries = 0;
  grpc::Status first;
  v1::ClusterStatus resp;
  std::thread starter;
  grpc::Status s = CallWithReconnect(
      absl::Now() + absl::Seconds(10), absl::Seconds(5), [&](grpc::ClientContext* ctx) {
        if (++tries == 2) {
          // The first try could not connect; the server starts while the second waits.
          starter = std::thread([&] {
            grpc::ServerBuilder b;
            b.AddListeningPort(target, grpc::InsecureServerCredentials());
            b.RegisterService(&service_);
            server = b.BuildAndStart();
            up = server != nullptr;
          });
        }
        grpc::Status st = stub->GetStatus(ctx, v1::GetStatusRequest(), &resp);
        if (tries == 1) first = st;
        return st;
      });
  if (starter.joinable()) starter.join();
  EXPECT_EQ(first.error_code(), grpc::StatusCode::UNAVAILABLE) << first.error_message();
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(tries, 2);
  EXPECT_TRUE(up);
  EXPECT_GT(resp.nodes(), 0u);
  if (server) server->Shutdown();
}

TEST_F(GrpcRetryTest, AServerThatStaysDownIsReportedByItsFirstErrorAfterTheWait) {
  testing::PortReservation reserved;  // bound, not listening: every connect is refused
  const int port = reserved.port();
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
  int port = 0;
  std::unique_ptr<grpc::Server> server = ServeOnAnyPort(&port);
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
