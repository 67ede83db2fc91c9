// A small blocking HTTP/1.1 client over a TCP socket for the alert senders (Alertmanager,
// webhooks): one request per connection (Connection: close), plain http:// only, every step bounded
// by one deadline (name resolution excepted: getaddrinfo keeps the system resolver's own timeouts).
// Reads Content-Length, chunked and close-delimited bodies, up to a size bound.
#ifndef RINGSIDE_DAEMON_AGGREGATOR_ALERTS_HTTP_CLIENT_H_
#define RINGSIDE_DAEMON_AGGREGATOR_ALERTS_HTTP_CLIENT_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ringside::daemon {

struct HttpUrl {
  std::string host;  // name or address; IPv6 without brackets
  int port = 80;
  std::string path = "/";  // path and query, starting with '/'
  // "host:port" as written, for the Host header.
  std::string authority;
};

// Parses "http://host[:port][/path][?query]" ("[::1]" for IPv6). https:// and anything else is
// InvalidArgument with a message naming the URL.
absl::StatusOr<HttpUrl> ParseHttpUrl(absl::string_view url);

struct HttpClientRequest {
  std::string method = "GET";
  HttpUrl url;
  std::vector<std::pair<std::string, std::string>> headers;  // besides Host, Content-Length
  std::string body;
  absl::Duration timeout = absl::Seconds(10);  // connect, send and receive together
  size_t max_response_bytes = 1 << 20;
};

struct HttpClientResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lowercased
  std::string body;
};

// Sends the request and reads the whole response. Errors: Unavailable (resolve, connect, reset),
// DeadlineExceeded (timeout), DataLoss (not HTTP, body too large). Any status code is a response.
absl::StatusOr<HttpClientResponse> SendHttp(const HttpClientRequest& request);

// Parses a complete HTTP/1.x response (status line, headers, body by Content-Length, chunked or
// to the end). Exposed for tests.
absl::StatusOr<HttpClientResponse> ParseHttpResponse(absl::string_view raw);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_ALERTS_HTTP_CLIENT_H_
