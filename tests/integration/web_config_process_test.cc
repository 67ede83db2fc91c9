// Both daemons under --web.config.file, scraped by Debian's real Prometheus 2.42 over tls_config
// and basic_auth: with the client certificate and the right password a target is up; without the
// certificate, or with a wrong password, it is down. A web config either daemon cannot use stops
// it at start with the reason (docs/http-security.md).
#include <arpa/inet.h>
#include <crypt.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"
#include "tests/testing/certs.h"
#include "tests/testing/process.h"
#include "tests/testing/temp_dir.h"

namespace ringside {
namespace {

using testing::BinaryPath;
using testing::Process;

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

int LoggedPort(Process& p, const std::string& prefix) {
  if (!p.WaitForStderr(prefix, absl::Seconds(30))) return 0;
  const std::string err = p.Stderr();
  const size_t at = err.find(prefix);
  const std::string line = err.substr(at, err.find('\n', at) - at);
  std::smatch m;
  if (!std::regex_search(line, m, std::regex("\\(port ([0-9]+)\\)"))) return 0;
  return std::stoi(m[1].str());
}

std::string Bcrypt(const std::string& password) {
  char setting[CRYPT_GENSALT_OUTPUT_SIZE];
  crypt_gensalt_rn("$2b$", 5, nullptr, 0, setting, sizeof(setting));
  auto data = std::make_unique<crypt_data>();
  const char* h = crypt_r(password.c_str(), setting, data.get());
  return h == nullptr ? "" : h;
}

class WebConfigProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pki = testing::TestPki::Create(dir_.path(), "fleet");
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = std::make_unique<testing::TestPki>(*pki);
    auto server = pki_->IssueServer("server");
    ASSERT_TRUE(server.ok()) << server.status();
    auto prom = pki_->IssueClient("prometheus");
    ASSERT_TRUE(prom.ok()) << prom.status();
    prom_ = *prom;
    std::filesystem::create_directories(dir_.path() + "/sys");
    web_ = dir_.path() + "/web.yml";
    std::ofstream(web_) << "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n"
                        << "  client_auth_type: RequireAndVerifyClientCert\n"
                        << "  client_ca_file: fleet-ca.pem\n"
                        << "basic_auth_users:\n  prom: " << Bcrypt("s3cret") << "\n";
    std::ofstream(dir_.path() + "/right") << "s3cret";
    std::ofstream(dir_.path() + "/wrong") << "guess";
  }

  std::vector<std::string> AgentArgs(const std::string& web) {
    return {BinaryPath("daemon/ringside-agent"), "--sysfs-root=" + dir_.path() + "/sys",
            "--listen=127.0.0.1:0", "--interval=200ms", "--node-name=n01",
            "--ethtool-source=off", "--web.config.file=" + web};
  }
  std::vector<std::string> AggregatorArgs(const std::string& web) {
    return {BinaryPath("daemon/ringside-aggregator"), "--listen=127.0.0.1:0",
            "--http-listen=127.0.0.1:0", "--web.config.file=" + web};
  }

  testing::TempDir dir_;
  std::unique_ptr<testing::TestPki> pki_;
  testing::CertPaths prom_;
  std::string web_;
};

TEST_F(WebConfigProcessTest, PrometheusScrapesWithCertificateAndPasswordOnly) {
  Process agent(AgentArgs(web_), dir_.path());
  const int agent_port = LoggedPort(agent, "serving /metrics");
  ASSERT_GT(agent_port, 0) << agent.Stderr();
  EXPECT_TRUE(absl::StrContains(agent.Stderr(), "over TLS")) << agent.Stderr();
  Process agg(AggregatorArgs(web_), dir_.path());
  const int agg_port = LoggedPort(agg, "HTTP (/metrics");
  ASSERT_GT(agg_port, 0) << agg.Stderr();

  const std::string prom_dir = dir_.path() + "/prometheus";
  std::filesystem::create_directories(prom_dir + "/data");
  {
    std::ofstream cfg(prom_dir + "/prometheus.yml");
    cfg << "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n";
    struct Job {
      const char* name;
      int port;
      bool cert;
      const char* password;
    } jobs[] = {{"agent-ok", agent_port, true, "right"},
                {"aggregator-ok", agg_port, true, "right"},
                {"agent-no-cert", agent_port, false, "right"},
                {"agent-wrong-password", agent_port, true, "wrong"}};
    for (const Job& j : jobs) {
      cfg << "  - job_name: " << j.name << "\n    scheme: https\n    tls_config:\n"
          << "      ca_file: " << pki_->ca_cert() << "\n";
      if (j.cert) cfg << "      cert_file: " << prom_.cert << "\n      key_file: " << prom_.key << "\n";
      cfg << "    basic_auth:\n      username: prom\n      password_file: " << dir_.path() << "/"
          << j.password << "\n    static_configs:\n      - targets: ['127.0.0.1:" << j.port
          << "']\n";
    }
  }
  const int prom_port = FreePort();
  ASSERT_GT(prom_port, 0);
  Process prom({"prometheus", "--config.file=" + prom_dir + "/prometheus.yml",
                "--storage.tsdb.path=" + prom_dir + "/data",
                "--web.listen-address=127.0.0.1:" + std::to_string(prom_port)},
               prom_dir);
  if (!prom.WaitForStderr("Server is ready to receive web requests", absl::Seconds(30))) {
    if (prom.Wait(absl::ZeroDuration()) == 127) GTEST_SKIP() << "prometheus is not installed";
    FAIL() << prom.Stderr();
  }
  std::map<std::string, std::string> health, error;
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(500));
    int status = 0;
    const std::string body = testing::HttpGet(prom_port, "/api/v1/targets", &status);
    if (status != 200) continue;
    nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
    if (j.is_discarded()) continue;
    health.clear();
    for (const auto& t : j["data"]["activeTargets"]) {
      const std::string job = t["labels"]["job"];
      health[job] = t["health"];
      error[job] = t["lastError"];
    }
    bool known = health.size() == 4;
    for (const auto& [job, h] : health) known = known && h != "unknown";
    if (known) break;
  }
  EXPECT_EQ(health["agent-ok"], "up") << error["agent-ok"];
  EXPECT_EQ(health["aggregator-ok"], "up") << error["aggregator-ok"];
  EXPECT_EQ(health["agent-no-cert"], "down");
  EXPECT_TRUE(absl::StrContains(error["agent-no-cert"], "403")) << error["agent-no-cert"];
  EXPECT_EQ(health["agent-wrong-password"], "down");
  EXPECT_TRUE(absl::StrContains(error["agent-wrong-password"], "401"))
      << error["agent-wrong-password"];
}

TEST_F(WebConfigProcessTest, AnUnusableWebConfigStopsEitherDaemonWithTheReason) {
  const std::string bad = dir_.path() + "/bad.yml";
  std::ofstream(bad) << "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n"
                     << "  client_allowed_sans: [prometheus]\n";
  for (const auto& args : {AgentArgs(bad), AggregatorArgs(bad)}) {
    testing::RunResult r = testing::Run(args, "", absl::Seconds(20));
    EXPECT_NE(r.exit_code, 0) << args[0] << ": " << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, "field client_allowed_sans not supported"))
        << args[0] << ": " << r.err;
  }
}

}  // namespace
}  // namespace ringside
