// A small blocking HTTP/1.1 client for the alert senders (Alertmanager, webhooks), on libcurl:
// http:// and https:// (the system CA store, or HttpTlsOptions::ca_file; a client certificate for
// mTLS), proxies from the environment (https_proxy, http_proxy, no_proxy: libcurl reads them), one
// request per connection, redirects not followed, the whole request (name resolution, connect,
// TLS handshake, send, answer) bounded by one timeout, the body by a size bound. No signals.
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
  bool https = false;
  std::string host;        // name or address; IPv6 without brackets
  int port = 80;           // 443 by default with https
  std::string path = "/";  // path and query, starting with '/'
  // "host:port" as written, for the Host header.
  std::string authority;
};

// Parses "http[s]://host[:port][/path][?query]" ("[::1]" for IPv6). Any other scheme, user info
// or a bad port is InvalidArgument with a message naming the URL.
absl::StatusOr<HttpUrl> ParseHttpUrl(absl::string_view url);

// TLS settings of https:// requests (ignored for http://). Files are PEM.
struct HttpTlsOptions {
  std::string ca_file;      // trust only these CAs; empty: the system CA store
  std::string client_cert;  // a client certificate (mTLS), with client_key; empty: none
  std::string client_key;
};

// The full URL ("https://host:port/path").
std::string HttpUrlString(const HttpUrl& url);

struct HttpClientRequest {
  std::string method = "GET";
  HttpUrl url;
  std::vector<std::pair<std::string, std::string>> headers;  // besides Host, Content-Length
  std::string body;
  absl::Duration timeout = absl::Seconds(10);  // connect, send and receive together
  size_t max_response_bytes = 1 << 20;         // of the body
  HttpTlsOptions tls;
};

struct HttpClientResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lowercased
  std::string body;
};

// Sends the request and reads the whole response. Errors: Unavailable (resolve, connect, reset,
// TLS: the message says why, e.g. the server's certificate failed verification), DeadlineExceeded
// (timeout), DataLoss (not HTTP, body too large), InvalidArgument (unreadable CA or client
// certificate file). Any status code is a response (3xx included: redirects are not followed).
absl::StatusOr<HttpClientResponse> SendHttp(const HttpClientRequest& request);

// Parses a complete HTTP/1.x response (status line, headers, body by Content-Length, chunked or
// to the end). Exposed for tests.
absl::StatusOr<HttpClientResponse> ParseHttpResponse(absl::string_view raw);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_ALERTS_HTTP_CLIENT_H_
