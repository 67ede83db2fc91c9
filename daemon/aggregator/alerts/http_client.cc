#include "daemon/aggregator/alerts/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cstdint>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ringside::daemon {
namespace {

// libcurl's global state, set up once (curl_global_init is not thread-safe against other libcurl
// calls; a function-local static is initialised exactly once, by the first sender to need it).
CURLcode GlobalInit() {
  static const CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);
  return rc;
}

struct CurlDeleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

struct Sink {
  HttpClientResponse* response;
  size_t max_body;
  bool too_large = false;
};

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* sink = static_cast<Sink*>(user);
  const size_t bytes = size * n;
  if (sink->response->body.size() + bytes > sink->max_body) {
    sink->too_large = true;
    return 0;  // anything short of `bytes` makes libcurl stop with CURLE_WRITE_ERROR
  }
  sink->response->body.append(data, bytes);
  return bytes;
}

// One header line at a time, the status lines included ("HTTP/1.1 100 Continue" starts a new
// block: only the last response's headers are kept).
size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* sink = static_cast<Sink*>(user);
  const size_t bytes = size * n;
  absl::string_view line(data, bytes);
  if (absl::StartsWith(line, "HTTP/")) {
    sink->response->headers.clear();
    return bytes;
  }
  if (const size_t colon = line.find(':'); colon != absl::string_view::npos) {
    sink->response
        ->headers[absl::AsciiStrToLower(absl::StripAsciiWhitespace(line.substr(0, colon)))] =
        std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
  }
  return bytes;
}

absl::Status CurlError(CURLcode code, const char* detail, const HttpClientRequest& req,
                       const Sink& sink) {
  const std::string why = detail[0] != '\0' ? std::string(detail) : curl_easy_strerror(code);
  const std::string& at = req.url.authority;
  switch (code) {
    case CURLE_COULDNT_RESOLVE_HOST:
      return absl::UnavailableError(absl::StrCat("cannot resolve ", req.url.host, ": ", why));
    case CURLE_COULDNT_RESOLVE_PROXY:
      return absl::UnavailableError(absl::StrCat("cannot resolve the proxy: ", why));
    case CURLE_COULDNT_CONNECT:
      return absl::UnavailableError(absl::StrCat("cannot connect to ", at, ": ", why));
    case CURLE_OPERATION_TIMEDOUT:
      return absl::DeadlineExceededError(absl::StrCat(
          "timed out after ", absl::FormatDuration(req.timeout), " (", at, "): ", why));
    case CURLE_PEER_FAILED_VERIFICATION:
      return absl::UnavailableError(
          absl::StrCat("TLS: the certificate of ", at, " failed verification (trusted CAs: ",
                       req.tls.ca_file.empty() ? "the system store" : req.tls.ca_file, "): ", why));
    case CURLE_SSL_CONNECT_ERROR:
      return absl::UnavailableError(absl::StrCat("TLS handshake with ", at, " failed: ", why));
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
      return absl::InvalidArgumentError(
          absl::StrCat("TLS: cannot use the CA or client certificate files: ", why));
    case CURLE_WRITE_ERROR:
    case CURLE_FILESIZE_EXCEEDED:
      if (sink.too_large || code == CURLE_FILESIZE_EXCEEDED) {
        return absl::DataLossError(
            absl::StrCat("response from ", at, " larger than ", req.max_response_bytes, " bytes"));
      }
      break;
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_UNSUPPORTED_PROTOCOL:
      return absl::DataLossError(absl::StrCat("not an HTTP answer from ", at, ": ", why));
    case CURLE_GOT_NOTHING:
      return absl::UnavailableError(absl::StrCat(at, " closed without answering"));
    default:
      break;
  }
  return absl::UnavailableError(absl::StrCat(at, ": ", why));
}

// Decodes a chunked body; false while incomplete or malformed (*bad set when malformed).
bool Dechunk(absl::string_view in, std::string* out, bool* bad) {
  out->clear();
  while (true) {
    const size_t eol = in.find("\r\n");
    if (eol == absl::string_view::npos) return false;
    absl::string_view size_text = in.substr(0, eol);
    if (size_t semi = size_text.find(';'); semi != absl::string_view::npos) {
      size_text = size_text.substr(0, semi);
    }
    uint64_t size = 0;
    if (!absl::SimpleHexAtoi(absl::StripAsciiWhitespace(size_text), &size) || size > (1u << 30)) {
      *bad = true;
      return false;
    }
    in.remove_prefix(eol + 2);
    if (size == 0) return true;  // trailers ignored
    if (in.size() < size + 2) return false;
    out->append(in.data(), size);
    in.remove_prefix(size + 2);
  }
}

}  // namespace

absl::StatusOr<HttpUrl> ParseHttpUrl(absl::string_view url) {
  absl::string_view rest = url;
  HttpUrl u;
  if (absl::ConsumePrefix(&rest, "https://")) {
    u.https = true;
    u.port = 443;
  } else if (!absl::ConsumePrefix(&rest, "http://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", url, "\" is not an http:// or https:// URL"));
  }
  const size_t slash = rest.find_first_of("/?");
  absl::string_view authority = rest.substr(0, slash);
  if (slash != absl::string_view::npos) {
    u.path = std::string(rest.substr(slash));
    if (u.path[0] == '?') u.path = "/" + u.path;
  }
  if (authority.empty() || absl::StrContains(authority, '@')) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", url, "\": give host[:port] (no user info)"));
  }
  u.authority = std::string(authority);
  absl::string_view host = authority;
  absl::string_view port;
  if (absl::StartsWith(authority, "[")) {
    const size_t close = authority.find(']');
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("\"", url, "\": unclosed [ in the host"));
    }
    host = authority.substr(1, close - 1);
    absl::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (!absl::ConsumePrefix(&after, ":")) {
        return absl::InvalidArgumentError(absl::StrCat("\"", url, "\": bad host"));
      }
      port = after;
    }
  } else if (const size_t colon = authority.rfind(':'); colon != absl::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  if (host.empty()) return absl::InvalidArgumentError(absl::StrCat("\"", url, "\": no host"));
  u.host = std::string(host);
  if (!port.empty()) {
    int p = 0;
    if (!absl::SimpleAtoi(port, &p) || p <= 0 || p > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("\"", url, "\": bad port \"", port, "\""));
    }
    u.port = p;
  }
  return u;
}

absl::StatusOr<HttpClientResponse> ParseHttpResponse(absl::string_view raw) {
  const size_t end = raw.find("\r\n\r\n");
  if (end == absl::string_view::npos) return absl::DataLossError("incomplete HTTP response head");
  std::vector<absl::string_view> lines = absl::StrSplit(raw.substr(0, end), "\r\n");
  HttpClientResponse r;
  // "HTTP/1.1 200 OK"
  std::vector<absl::string_view> status = absl::StrSplit(lines[0], absl::MaxSplits(' ', 2));
  if (status.size() < 2 || !absl::StartsWith(status[0], "HTTP/1.") ||
      !absl::SimpleAtoi(status[1], &r.status) || r.status < 100 || r.status > 999) {
    return absl::DataLossError(
        absl::StrCat("not an HTTP response: \"", lines[0].substr(0, 80), "\""));
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == absl::string_view::npos) continue;
    r.headers[absl::AsciiStrToLower(absl::StripAsciiWhitespace(lines[i].substr(0, colon)))] =
        std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
  }
  absl::string_view body = raw.substr(end + 4);
  if (auto te = r.headers.find("transfer-encoding");
      te != r.headers.end() && absl::StrContains(absl::AsciiStrToLower(te->second), "chunked")) {
    bool bad = false;
    if (!Dechunk(body, &r.body, &bad)) {
      return absl::DataLossError(bad ? "malformed chunked body" : "incomplete chunked body");
    }
  } else if (auto cl = r.headers.find("content-length"); cl != r.headers.end()) {
    uint64_t n = 0;
    if (!absl::SimpleAtoi(cl->second, &n)) return absl::DataLossError("bad Content-Length");
    if (body.size() < n) return absl::DataLossError("incomplete body");
    r.body = std::string(body.substr(0, n));
  } else {
    r.body = std::string(body);
  }
  return r;
}

std::string HttpUrlString(const HttpUrl& url) {
  return absl::StrCat(url.https ? "https://" : "http://", url.authority, url.path);
}

absl::StatusOr<HttpClientResponse> SendHttp(const HttpClientRequest& req) {
  if (GlobalInit() != CURLE_OK) return absl::InternalError("libcurl failed to initialise");
  if (req.timeout <= absl::ZeroDuration()) {
    return absl::DeadlineExceededError(absl::StrCat("no time left for ", req.url.authority));
  }
  std::unique_ptr<CURL, CurlDeleter> handle(curl_easy_init());
  if (handle == nullptr) return absl::InternalError("curl_easy_init failed");
  CURL* c = handle.get();
  HttpClientResponse response;
  Sink sink{&response, req.max_response_bytes};
  char error[CURL_ERROR_SIZE] = {0};
  const std::string url = HttpUrlString(req.url);
  const long timeout_ms = static_cast<long>(
      std::clamp<int64_t>(absl::ToInt64Milliseconds(req.timeout), 1, int64_t{1} << 30));

  // Header list: the caller's, minus what libcurl would add on its own for a POST body
  // (Content-Type: application/x-www-form-urlencoded, Expect: 100-continue).
  curl_slist* raw_headers = nullptr;
  bool has_content_type = false;
  for (const auto& [name, value] : req.headers) {
    if (absl::EqualsIgnoreCase(name, "content-type")) has_content_type = true;
    raw_headers = curl_slist_append(raw_headers, absl::StrCat(name, ": ", value).c_str());
  }
  if (!has_content_type) raw_headers = curl_slist_append(raw_headers, "Content-Type:");
  raw_headers = curl_slist_append(raw_headers, "Expect:");
  std::unique_ptr<curl_slist, SlistDeleter> headers(raw_headers);

  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  // Proxies come from the environment (https_proxy, no_proxy), except for a receiver on this
  // host: a loopback Alertmanager or webhook is never reached through a proxy.
  if (req.url.host == "localhost" || req.url.host == "::1" ||
      absl::StartsWith(req.url.host, "127.")) {
    curl_easy_setopt(c, CURLOPT_PROXY, "");
  }
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
  curl_easy_setopt(c, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &sink);
  curl_easy_setopt(
      c, CURLOPT_MAXFILESIZE_LARGE,
      static_cast<curl_off_t>(std::min<size_t>(req.max_response_bytes, size_t{1} << 62)));
  if (!req.body.empty() || req.method == "POST" || req.method == "PUT") {
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, req.body.data());
    if (req.method != "POST") curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  } else if (req.method == "HEAD") {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else if (req.method != "GET") {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  }
  // TLS: the peer's certificate and name are always verified.
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
  if (!req.tls.ca_file.empty()) {
    curl_easy_setopt(c, CURLOPT_CAINFO, req.tls.ca_file.c_str());
    curl_easy_setopt(c, CURLOPT_CAPATH,
                     static_cast<char*>(nullptr));  // only this file, not also /etc/ssl/certs
  }
  if (!req.tls.client_cert.empty()) {
    curl_easy_setopt(c, CURLOPT_SSLCERT, req.tls.client_cert.c_str());
    curl_easy_setopt(c, CURLOPT_SSLKEY, req.tls.client_key.c_str());
  }
  // Proxies: libcurl reads http_proxy, https_proxy/HTTPS_PROXY, all_proxy and no_proxy itself.

  const CURLcode rc = curl_easy_perform(c);
  if (rc != CURLE_OK) return CurlError(rc, error, req, sink);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  if (status < 100 || status > 999) {
    return absl::DataLossError(absl::StrCat("not an HTTP answer from ", req.url.authority));
  }
  response.status = static_cast<int>(status);
  return response;
}

}  // namespace ringside::daemon
