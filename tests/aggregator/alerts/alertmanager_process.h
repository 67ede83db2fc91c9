// A real Alertmanager for process tests (Debian's prometheus-alertmanager), routing every alert to
// a webhook of the test; alone or as a member of a cluster. And the loopback HTTP helpers those
// tests share. Header-only; link ringside::alerts (SendHttp) and nlohmann_json.
#ifndef RINGSIDE_TESTS_AGGREGATOR_ALERTS_ALERTMANAGER_PROCESS_H_
#define RINGSIDE_TESTS_AGGREGATOR_ALERTS_ALERTMANAGER_PROCESS_H_

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/aggregator/alerts/http_client.h"
#include "nlohmann/json.hpp"
#include "tests/aggregator/alerts/http_receiver.h"
#include "tests/testing/eventually.h"
#include "tests/testing/port_reservation.h"
#include "tests/testing/process.h"

namespace ringside::testing {

inline constexpr char kAlertmanagerBinary[] = "/usr/bin/prometheus-alertmanager";

// A TCP port on 127.0.0.1 nobody listens on now.
inline int FreePort() {
  HttpReceiver r;
  const int port = r.port();
  r.Stop();
  return port;
}

inline std::optional<std::string> Get(int port, const std::string& path) {
  ::ringside::daemon::HttpClientRequest req;
  req.url = *::ringside::daemon::ParseHttpUrl(absl::StrCat("http://127.0.0.1:", port, path));
  req.timeout = absl::Seconds(5);
  auto r = ::ringside::daemon::SendHttp(req);
  if (!r.ok() || r->status != 200) return std::nullopt;
  return r->body;
}

class Alertmanager {
 public:
  // Routes every alert to `notify_url` (send_resolved), grouped per incident with group_wait 1 s
  // and `group_interval`. Clustering off unless `cluster_flags` are given
  // (--cluster.listen-address, --cluster.peer, ...). In a cluster keep group_interval above
  // (peers - 1) x --cluster.peer-timeout, or Alertmanager itself sends stale duplicates
  // (docs/scale.md, "Failure modes").
  Alertmanager(const std::string& dir, const std::string& notify_url,
               std::vector<std::string> cluster_flags = {"--cluster.listen-address="},
               const std::string& group_interval = "1s")
      : port_(FreePort()) {
    std::filesystem::create_directories(dir + "/am");
    const std::string config = dir + "/alertmanager.yml";
    std::ofstream(config) << "route:\n"
                             "  receiver: hook\n"
                             "  group_by: ['alertname', 'ringside_incident_key']\n"
                             "  group_wait: 1s\n"
                             "  group_interval: "
                          << group_interval
                          << "\n"
                             "  repeat_interval: 1h\n"
                             "receivers:\n"
                             "  - name: hook\n"
                             "    webhook_configs:\n"
                             "      - url: '"
                          << notify_url << "'\n        send_resolved: true\n";
    std::vector<std::string> argv = {kAlertmanagerBinary, "--config.file=" + config,
                                     "--storage.path=" + dir + "/am",
                                     absl::StrCat("--web.listen-address=127.0.0.1:", port_),
                                     "--log.level=info"};
    argv.insert(argv.end(), cluster_flags.begin(), cluster_flags.end());
    process_ = std::make_unique<Process>(argv, dir);
  }
  // Whether its cluster has settled with `peers` members (GET /api/v2/status).
  bool ClusterReady(size_t peers) {
    std::optional<std::string> body = Get(port_, "/api/v2/status");
    if (!body) return false;
    auto j = nlohmann::json::parse(*body, nullptr, false);
    if (j.is_discarded() || !j.contains("cluster")) return false;
    return j["cluster"].value("status", "") == "ready" && j["cluster"].contains("peers") &&
           j["cluster"]["peers"].size() == peers;
  }
  ~Alertmanager() {
    process_->Signal(SIGTERM);
    process_->Wait(absl::Seconds(10));
  }
  bool WaitReady() {
    return Eventually([&] { return Get(port_, "/-/ready").has_value(); }, absl::Seconds(30));
  }
  // GET /api/v2/alerts: the alerts Alertmanager holds that have not ended.
  nlohmann::json Alerts() {
    std::optional<std::string> body = Get(port_, "/api/v2/alerts");
    if (!body) return nlohmann::json::array();
    return nlohmann::json::parse(*body, nullptr, false);
  }
  std::optional<nlohmann::json> Find(const std::string& alertname) {
    for (const auto& a : Alerts()) {
      if (a.contains("labels") && a["labels"].value("alertname", "") == alertname) return a;
    }
    return std::nullopt;
  }
  int port() const { return port_; }
  std::string url() const { return absl::StrCat("http://127.0.0.1:", port_); }
  std::string Stderr() const { return process_->Stderr(); }

 private:
  int port_;
  std::unique_ptr<Process> process_;
};

}  // namespace ringside::testing

#endif  // RINGSIDE_TESTS_AGGREGATOR_ALERTS_ALERTMANAGER_PROCESS_H_
