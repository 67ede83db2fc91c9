#include "daemon/ctl/fleet.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ringside::daemon::ctl {
namespace {

constexpr char kEachPrefix[] = "each:";

// "HOST:PORT" or "[V6]:PORT" → host (without brackets) and port.
absl::Status SplitHostPort(const std::string& hostport, std::string& host, std::string& port) {
  const size_t colon = hostport.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == hostport.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--aggregator entry \"", hostport, "\" is not HOST:PORT"));
  }
  host = hostport.substr(0, colon);
  port = hostport.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ResolveEach(const std::string& hostport) {
  std::string host, port;
  if (absl::Status s = SplitHostPort(hostport, host, port); !s.ok()) return s;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) {
    return absl::NotFoundError(absl::StrCat("--aggregator each:", hostport, ": cannot resolve \"",
                                            host, "\": ", gai_strerror(rc)));
  }
  std::vector<std::string> out;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    if (a->ai_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr, text, sizeof text);
      out.push_back(absl::StrCat(text, ":", port));
    } else if (a->ai_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr, text,
                sizeof text);
      out.push_back(absl::StrCat("[", text, "]:", port));
    }
  }
  freeaddrinfo(res);
  if (out.empty()) {
    return absl::NotFoundError(
        absl::StrCat("--aggregator each:", hostport, ": \"", host, "\" has no address"));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<AggregatorTarget>> ParseAggregatorTargets(const std::string& value) {
  std::vector<AggregatorTarget> out;
  auto add = [&out](AggregatorTarget t) {
    for (const AggregatorTarget& o : out) {
      if (o.address == t.address) return;
    }
    out.push_back(std::move(t));
  };
  for (absl::string_view raw : absl::StrSplit(value, ',')) {
    const std::string entry(absl::StripAsciiWhitespace(raw));
    if (entry.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--aggregator \"", value, "\" has an empty entry"));
    }
    if (absl::StartsWith(entry, kEachPrefix)) {
      const std::string hostport = entry.substr(sizeof(kEachPrefix) - 1);
      absl::StatusOr<std::vector<std::string>> addresses = ResolveEach(hostport);
      if (!addresses.ok()) return addresses.status();
      std::string host, port;
      (void)SplitHostPort(hostport, host, port);
      for (const std::string& a : *addresses) add({a, host});
    } else {
      add({entry, ""});
    }
  }
  if (out.empty()) return absl::InvalidArgumentError("--aggregator is empty");
  return out;
}

absl::StatusOr<std::unique_ptr<Fleet>> Fleet::Connect(const ConnectionOptions& options) {
  absl::StatusOr<std::vector<AggregatorTarget>> targets = ParseAggregatorTargets(options.target);
  if (!targets.ok()) return targets.status();
  auto fleet = std::make_unique<Fleet>();
  for (const AggregatorTarget& t : *targets) {
    ConnectionOptions one = options;
    one.target = t.address;
    one.tls_name = t.tls_name;
    absl::StatusOr<std::unique_ptr<QueryClient>> client = QueryClient::Connect(one);
    if (!client.ok()) return client.status();
    fleet->clients_.push_back(std::move(*client));
  }
  return fleet;
}

absl::Status SortOutFailures(const std::vector<absl::Status>& statuses, size_t answered,
                             bool not_found_is_no_answer, std::ostream& err) {
  std::vector<std::string> messages;
  absl::Status first;
  // With NOT_FOUND as no answer, an aggregator that could not be asked may be the one that knows:
  // its error, not "not found", is what the caller reports (the node lives on that shard).
  absl::Status first_failure;
  for (const absl::Status& s : statuses) {
    if (s.ok()) continue;
    if (first.ok()) first = s;
    if (first_failure.ok() && !(not_found_is_no_answer && absl::IsNotFound(s))) first_failure = s;
    if (not_found_is_no_answer && absl::IsNotFound(s)) {
      if (answered == 0) messages.push_back(std::string(s.message()));
      continue;
    }
    if (answered > 0) {
      err << "ringside: warning: " << s.message() << "\n";
    } else {
      messages.push_back(std::string(s.message()));
    }
  }
  err.flush();
  if (answered > 0) return absl::OkStatus();
  if (messages.size() == 1) return first;
  const absl::Status& code_of = first_failure.ok() ? first : first_failure;
  return absl::Status(code_of.code(), absl::StrJoin(messages, "; "));
}

}  // namespace ringside::daemon::ctl
