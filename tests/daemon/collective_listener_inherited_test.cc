// CollectiveListener on a socket it did not make (systemd socket activation): it serves plugins
// on the passed fd and leaves the socket file alone on stop; a passed fd that is not a stream
// socket is refused.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "collectors/nccl_plugin/record_proto.h"
#include "daemon/agent/collective_listener.h"
#include "tests/testing/temp_dir.h"

namespace ringside::daemon {
namespace {

namespace rc = ::ringside::collectors;

sockaddr_un Address(const std::string& path) {
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  return addr;
}

TEST(CollectiveListenerInheritedTest, ServesThePassedSocketAndNeverUnlinksIt) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/passed.sock";
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr = Address(path);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 8), 0);

  absl::Mutex mu;
  int records = 0;
  CollectiveListenerOptions o;
  o.socket_path = dir.path() + "/not-made.sock";  // only for the log when inherited
  o.inherited_fd = fd;
  auto l = CollectiveListener::Start(o, [&](v1::CollectiveBatch b) {
    absl::MutexLock lock(&mu);
    records += b.records_size();
  });
  ASSERT_TRUE(l.ok()) << l.status();

  const int c = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::connect(c, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  rc::CollectiveRecordFields r;
  r.rank = 0;
  r.nranks = 2;
  r.pid = 77;
  r.comm_id = 1;
  r.bytes = 8;
  r.enqueue_unix_nanos = 1'700'000'000'000'000'000;
  r.channels = 1;
  r.job_id.Set("j");
  r.host.Set("h");
  r.function.Set("AllReduce");
  rc::BatchHeaderFields h;
  h.job_id.Set("j");
  std::string frame = *rc::EncodeFrame(h, {r, r});
  ASSERT_EQ(::send(c, frame.data(), frame.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(frame.size()));
  {
    absl::MutexLock lock(&mu);
    EXPECT_TRUE(mu.AwaitWithTimeout(absl::Condition(
                                        +[](int* n) { return *n >= 2; }, &records),
                                    absl::Seconds(10)));
  }
  ::close(c);
  l->reset();

  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << "the listener removed a socket it did not make";
  EXPECT_NE(::stat(o.socket_path.c_str(), &st), 0);
  // The listener closed the fd it adopted.
  EXPECT_EQ(::fcntl(fd, F_GETFD), -1);
}

TEST(CollectiveListenerInheritedTest, RefusesAPassedFdThatIsNotAStreamSocket) {
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  CollectiveListenerOptions o;
  o.inherited_fd = fd;
  auto l = CollectiveListener::Start(o, [](v1::CollectiveBatch) {});
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), absl::StatusCode::kInvalidArgument) << l.status();
  ::close(fd);
}

}  // namespace
}  // namespace ringside::daemon
