// daemon/common/http_server: serving, and stopping without civetweb's 2 s poll quantum.
#include "daemon/common/http_server.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/aggregator/alerts/http_client.h"

namespace ringside::daemon {
namespace {

TEST(HttpServerTest, ServesAHandler) {
  absl::StatusOr<std::unique_ptr<HttpServer>> s = HttpServer::Start("127.0.0.1:0");
  ASSERT_TRUE(s.ok()) << s.status();
  (*s)->Handle("/x", [](const HttpRequest&) {
    HttpResponse r;
    r.body = "hello\n";
    return r;
  });
  HttpClientRequest req;
  req.url = *ParseHttpUrl(absl::StrCat("http://127.0.0.1:", (*s)->port(), "/x"));
  req.method = "GET";
  absl::StatusOr<HttpClientResponse> r = SendHttp(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hello\n");
}

// civetweb's listener thread polls 2 s at a time and checks its stop flag between polls: a
// server stopped right after it started used to wait out most of a poll (1.6 s measured on every
// aggregator stop). Stopping now wakes the poll; anything near 2 s is that bug back.
TEST(HttpServerTest, StopsWithoutWaitingForCivetwebsPoll) {
  for (const char* listen : {"127.0.0.1:0", ":0"}) {
    absl::StatusOr<std::unique_ptr<HttpServer>> s = HttpServer::Start(listen);
    ASSERT_TRUE(s.ok()) << s.status();
    absl::SleepFor(absl::Milliseconds(100));  // the listener is inside a fresh 2 s poll now
    const absl::Time start = absl::Now();
    s->reset();
    EXPECT_LT(absl::Now() - start, absl::Seconds(1)) << listen;
  }
}

}  // namespace
}  // namespace ringside::daemon
