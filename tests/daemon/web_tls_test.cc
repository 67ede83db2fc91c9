// HttpServer under a web configuration file, checked from the outside with curl and openssl
// s_client as a scraper would meet it: TLS with verified client certificates from one CA only
// (not another CA, not one the system store trusts), bcrypt users, min_version, no plaintext,
// open probes, configured headers, and a changed password or renewed certificate taking effect
// without a restart. (Prometheus itself scrapes the agent in web_config_process_test.)
#include <crypt.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "daemon/common/http_server.h"
#include "tests/testing/certs.h"
#include "tests/testing/process.h"
#include "tests/testing/temp_dir.h"

namespace ringside::daemon {
namespace {

std::string Bcrypt(const std::string& password) {
  char setting[CRYPT_GENSALT_OUTPUT_SIZE];
  EXPECT_NE(crypt_gensalt_rn("$2b$", 5, nullptr, 0, setting, sizeof(setting)), nullptr);
  auto data = std::make_unique<crypt_data>();
  const char* h = crypt_r(password.c_str(), setting, data.get());
  return h == nullptr ? "" : h;
}

void WriteFile(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    f << text;
  }
  ASSERT_EQ(rename(tmp.c_str(), path.c_str()), 0);
}

struct CurlResult {
  int code = 0;         // HTTP status; 0 when there was no HTTP answer (refused handshake)
  std::string headers;  // the response head, or curl's error when there is none
};

class WebTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pki = testing::TestPki::Create(dir_.path(), "fleet");
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = std::make_unique<testing::TestPki>(*pki);
    // Other CAs in folders of their own (TestPki names a client's files after its name).
    std::filesystem::create_directories(dir_.path() + "/rogue");
    std::filesystem::create_directories(dir_.path() + "/system");
    auto rogue = testing::TestPki::Create(dir_.path() + "/rogue", "rogue");
    ASSERT_TRUE(rogue.ok()) << rogue.status();
    auto system = testing::TestPki::Create(dir_.path() + "/system", "system");
    ASSERT_TRUE(system.ok()) << system.status();
    auto server = pki_->IssueServer("server");
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *server;
    auto prom = pki_->IssueClient("prometheus");
    ASSERT_TRUE(prom.ok()) << prom.status();
    prom_ = *prom;
    auto rc = rogue->IssueClient("prometheus");
    ASSERT_TRUE(rc.ok()) << rc.status();
    rogue_ = *rc;
    auto sc = system->IssueClient("prometheus");
    ASSERT_TRUE(sc.ok()) << sc.status();
    system_ = *sc;
    // The "system store" of this process trusts the system CA: the server must still refuse
    // its certificates (civetweb's own setup would accept them).
    setenv("SSL_CERT_FILE", system->ca_cert().c_str(), 1);
    config_ = dir_.path() + "/web.yml";
    WriteConfig("pw-1");
    HttpServerOptions o;
    o.web_config_file = config_;
    o.log = [](const std::string&) {};
    auto s = HttpServer::Start("127.0.0.1:0", o);
    ASSERT_TRUE(s.ok()) << s.status();
    http_ = std::move(*s);
    ASSERT_TRUE(http_->tls());
    for (const char* path : {"/metrics", "/healthz"}) {
      http_->Handle(path, [](const HttpRequest& req) {
        HttpResponse r;
        r.body = req.tls ? "tls\n" : "plain\n";
        return r;
      });
    }
  }
  void TearDown() override { unsetenv("SSL_CERT_FILE"); }

  void WriteConfig(const std::string& password) {
    WriteFile(config_, absl::StrCat("tls_server_config:\n  cert_file: server.pem\n",
                                    "  key_file: server.key\n",
                                    "  client_auth_type: RequireAndVerifyClientCert\n",
                                    "  client_ca_file: fleet-ca.pem\n  min_version: TLS13\n",
                                    "http_server_config:\n  headers:\n",
                                    "    X-Frame-Options: deny\n",
                                    "basic_auth_users:\n  prom: ", Bcrypt(password), "\n"));
  }

  CurlResult Get(const std::string& path, const testing::CertPaths* cert,
                 const std::string& user_pass, std::vector<std::string> extra = {},
                 const std::string& scheme = "https") {
    std::vector<std::string> args = {"curl", "-sS", "--max-time", "10", "-o", "/dev/null",
                                     "-D", "-", "-w", "%{http_code}", "--cacert",
                                     pki_->ca_cert()};
    if (cert != nullptr) args.insert(args.end(), {"--cert", cert->cert, "--key", cert->key});
    if (!user_pass.empty()) args.insert(args.end(), {"-u", user_pass});
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back(absl::StrCat(scheme, "://127.0.0.1:", http_->port(), path));
    testing::RunResult r = testing::Run(args, "", absl::Seconds(20));
    CurlResult out;
    if (r.out.size() >= 3) {
      out.code = std::atoi(r.out.substr(r.out.size() - 3).c_str());
      out.headers = r.out.substr(0, r.out.size() - 3);
    }
    if (out.code == 0) out.headers = r.err;
    return out;
  }

  // The serial number of the certificate the server presents to a new connection.
  std::string ServedSerial() {
    testing::RunResult r = testing::Run(
        {"sh", "-c",
         absl::StrCat("openssl s_client -connect 127.0.0.1:", http_->port(),
                      " -cert ", prom_.cert, " -key ", prom_.key,
                      " </dev/null 2>/dev/null | openssl x509 -noout -serial")},
        "", absl::Seconds(20));
    return std::string(absl::StripAsciiWhitespace(r.out));
  }

  testing::TempDir dir_;
  std::unique_ptr<testing::TestPki> pki_;
  testing::CertPaths server_, prom_, rogue_, system_;
  std::string config_;
  std::unique_ptr<HttpServer> http_;
};

TEST_F(WebTlsTest, TheScrapeMatrix) {
  // Right certificate and password: 200, with the configured header.
  CurlResult ok = Get("/metrics", &prom_, "prom:pw-1");
  ASSERT_EQ(ok.code, 200) << ok.headers;
  EXPECT_TRUE(absl::StrContains(ok.headers, "X-Frame-Options: deny")) << ok.headers;
  // Wrong or no password: 401 asking for Basic.
  CurlResult wrong = Get("/metrics", &prom_, "prom:pw-2");
  EXPECT_EQ(wrong.code, 401);
  EXPECT_TRUE(absl::StrContains(wrong.headers, "WWW-Authenticate: Basic")) << wrong.headers;
  EXPECT_EQ(Get("/metrics", &prom_, "").code, 401);
  EXPECT_EQ(Get("/metrics", &prom_, "nobody:pw-1").code, 401);
  // No client certificate: refused (the probes' paths stay open, see below).
  EXPECT_EQ(Get("/metrics", nullptr, "prom:pw-1").code, 403);
  // Another CA's certificate, and one from a CA the system store trusts: no handshake.
  EXPECT_EQ(Get("/metrics", &rogue_, "prom:pw-1").code, 0);
  EXPECT_EQ(Get("/metrics", &system_, "prom:pw-1").code, 0);
  // Below min_version (TLS13): no handshake.
  EXPECT_EQ(Get("/metrics", &prom_, "prom:pw-1", {"--tlsv1.2", "--tls-max", "1.2"}).code, 0);
  // Plaintext: no answer.
  EXPECT_NE(Get("/metrics", nullptr, "prom:pw-1", {}, "http").code, 200);
  // The kubelet's probe, with neither certificate nor password.
  EXPECT_EQ(Get("/healthz", nullptr, "").code, 200);
}

TEST_F(WebTlsTest, PasswordAndCertificateChangesApplyWithoutRestart) {
  ASSERT_EQ(Get("/metrics", &prom_, "prom:pw-1").code, 200);
  WriteConfig("pw-2");
  EXPECT_EQ(Get("/metrics", &prom_, "prom:pw-1").code, 401);
  EXPECT_EQ(Get("/metrics", &prom_, "prom:pw-2").code, 200);

  const std::string before = ServedSerial();
  ASSERT_TRUE(absl::StartsWith(before, "serial=")) << before;
  auto renewed = pki_->IssueServer("renewed");
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  // Key first: between the two writes the pair does not match, and the old one stays in use.
  std::ifstream key(renewed->key), cert(renewed->cert);
  std::stringstream k, c;
  k << key.rdbuf();
  c << cert.rdbuf();
  WriteFile(server_.key, k.str());
  EXPECT_EQ(Get("/metrics", &prom_, "prom:pw-2").code, 200) << "a half-renewed pair broke TLS";
  WriteFile(server_.cert, c.str());
  const std::string after = ServedSerial();
  EXPECT_TRUE(absl::StartsWith(after, "serial=")) << after;
  EXPECT_NE(after, before);
  EXPECT_EQ(Get("/metrics", &prom_, "prom:pw-2").code, 200);
}

TEST(WebTlsStartTest, UnusableConfigStopsTheStart) {
  testing::TempDir dir;
  const std::string config = dir.path() + "/web.yml";
  WriteFile(config, "tls_server_config:\n  cert_file: missing.pem\n  key_file: missing.key\n");
  HttpServerOptions o;
  o.web_config_file = config;
  auto s = HttpServer::Start("127.0.0.1:0", o);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.status().message(), "cannot load cert_file")) << s.status();
}

TEST(PlaintextApiTest, OnlyLoopbackOrTlsOrAllowInsecure) {
  HttpRequest req;
  req.remote_addr = "127.0.0.1";
  EXPECT_TRUE(PlaintextApiAllowed(req, false));
  req.remote_addr = "10.1.2.3";
  EXPECT_FALSE(PlaintextApiAllowed(req, false));
  EXPECT_EQ(PlaintextApiRefusal(req).status, 403);
  EXPECT_TRUE(absl::StrContains(PlaintextApiRefusal(req).body, "--web.config.file"));
  EXPECT_TRUE(PlaintextApiAllowed(req, true));
  req.tls = true;
  EXPECT_TRUE(PlaintextApiAllowed(req, false));
}

}  // namespace
}  // namespace ringside::daemon
