// daemon/common/web_config, basic_auth: the exporter-toolkit subset is parsed strictly, bcrypt
// hashes made by libxcrypt verify (and are cached), and the daemons' verdict on a web config file
// is the one of Prometheus's own `promtool check web-config` (Debian's prometheus 2.42).
#include <crypt.h>
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/common/basic_auth.h"
#include "daemon/common/flags.h"
#include "daemon/common/web_config.h"
#include "daemon/common/web_security.h"
#include "tests/testing/certs.h"
#include "tests/testing/process.h"
#include "tests/testing/temp_dir.h"

namespace ringside::daemon {
namespace {

// A $2b$ hash of `password` at `cost`, made by libxcrypt (as `htpasswd -B` would).
std::string Bcrypt(const std::string& password, int cost) {
  char setting[CRYPT_GENSALT_OUTPUT_SIZE];
  EXPECT_NE(crypt_gensalt_rn("$2b$", cost, nullptr, 0, setting, sizeof(setting)), nullptr);
  auto data = std::make_unique<crypt_data>();
  const char* h = crypt_r(password.c_str(), setting, data.get());
  return h == nullptr ? "" : h;
}

std::string Base64(const std::string& s) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  int val = 0, bits = -6;
  for (unsigned char c : s) {
    val = (val << 8) + c;
    bits += 8;
    while (bits >= 0) {
      out.push_back(k[(val >> bits) & 0x3F]);
      bits -= 6;
    }
  }
  if (bits > -6) out.push_back(k[((val << 8) >> (bits + 8)) & 0x3F]);
  while (out.size() % 4) out.push_back('=');
  return out;
}

TEST(WebConfigTest, ParsesTheSubset) {
  absl::StatusOr<WebConfig> c = ParseWebConfig(R"(
tls_server_config:
  cert_file: server.pem
  key_file: /abs/server.key
  client_auth_type: RequireAndVerifyClientCert
  client_ca_file: ca.pem
  min_version: TLS13
  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_AES_128_GCM_SHA256]
http_server_config:
  headers:
    X-Frame-Options: deny
basic_auth_users:
  prom: $2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi
)",
                                               "/etc/ringside");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->tls);
  EXPECT_EQ(c->tls_config.cert_file, "/etc/ringside/server.pem");
  EXPECT_EQ(c->tls_config.key_file, "/abs/server.key");
  EXPECT_EQ(c->tls_config.client_ca_file, "/etc/ringside/ca.pem");
  EXPECT_EQ(c->tls_config.client_auth, ClientAuth::kRequireAndVerify);
  EXPECT_EQ(c->tls_config.min_version, 0x0304);
  ASSERT_EQ(c->tls_config.cipher_suites.size(), 1u);
  EXPECT_EQ(c->tls_config.cipher_suites[0], "ECDHE-ECDSA-AES128-GCM-SHA256");
  EXPECT_EQ(c->headers.at("X-Frame-Options"), "deny");
  EXPECT_EQ(c->basic_auth_users.size(), 1u);
  // An empty file is plaintext with no users, as in exporter-toolkit.
  absl::StatusOr<WebConfig> empty = ParseWebConfig("", "/");
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->tls);
}

TEST(WebConfigTest, RefusesWhatItDoesNotImplementByName) {
  struct Case {
    const char* yaml;
    const char* says;
  } cases[] = {
      {"tls_server_config:\n  cert_file: a\n  key_file: b\n  client_allowed_sans: [x]\n",
       "field client_allowed_sans not supported in tls_server_config"},
      {"rate_limit:\n  interval: 1s\n", "field rate_limit not supported in the web config"},
      {"tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: RequireAnyClientCert\n",
       "accepts unverified certificates"},
      {"tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: RequireAndVerifyClientCert\n",
       "needs client_ca_file"},
      {"tls_server_config:\n  cert_file: a\n  key_file: b\n  client_ca_file: c\n",
       "without a Client Auth Policy"},
      {"tls_server_config:\n  cert_file: a\n", "missing key_file"},
      {"tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS14\n",
       "unknown TLS version TLS14"},
      {"tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites: [TLS_FOO]\n",
       "unknown or unsupported cipher suite TLS_FOO"},
      {"http_server_config:\n  headers:\n    Server: x\n", "HTTP header Server can not be configured"},
      {"http_server_config:\n  http2: true\n", "http2: true is not supported"},
      {"basic_auth_users:\n  prom: secret\n", "the password of prom is not a bcrypt hash"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<WebConfig> r = ParseWebConfig(c.yaml, "/");
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_NE(r.status().message().find(c.says), std::string::npos)
        << c.yaml << " → " << r.status();
  }
}

// Prometheus's spelling of the flag is accepted: dots in a flag's name, not in its value.
TEST(WebConfigTest, FlagSpelledTheExporterWay) {
  std::vector<std::string> in = {"ringside-agent", "--web.config.file=/etc/a.b/web-config.yml",
                                 "--web-config-file", "x.yml"};
  std::vector<char*> argv;
  for (std::string& a : in) argv.push_back(a.data());
  std::vector<std::string> out = NormalizeFlagNames(static_cast<int>(argv.size()), argv.data());
  EXPECT_EQ(out[1], "--web_config_file=/etc/a.b/web-config.yml");
  EXPECT_EQ(out[2], "--web_config_file");
  EXPECT_EQ(out[3], "x.yml");
}

TEST(BasicAuthTest, BcryptFromLibxcryptVerifiesAndIsCached) {
  const std::string hash = Bcrypt("carol123", 10);
  ASSERT_TRUE(IsBcryptHash(hash)) << hash;
  EXPECT_TRUE(BcryptMatches("carol123", hash));
  EXPECT_FALSE(BcryptMatches("carol124", hash));
  // Go's bcrypt writes $2a$ and htpasswd $2y$: libxcrypt checks both.
  EXPECT_TRUE(BcryptMatches("fakepassword",
                            "$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi"));

  BasicAuthChecker checker;
  const std::map<std::string, std::string> users = {{"carol", hash}};
  const std::string good = "Basic " + Base64("carol:carol123");
  absl::Time t0 = absl::Now();
  EXPECT_TRUE(checker.Check(users, good));
  const absl::Duration first = absl::Now() - t0;
  t0 = absl::Now();
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(checker.Check(users, good));
  const absl::Duration cached = absl::Now() - t0;
  EXPECT_LT(cached, first) << "20 cached checks took " << cached << ", one bcrypt " << first;
  EXPECT_FALSE(checker.Check(users, "Basic " + Base64("carol:wrong")));
  EXPECT_FALSE(checker.Check(users, "Basic " + Base64("mallory:carol123")));
  EXPECT_FALSE(checker.Check(users, "Bearer abc"));
  EXPECT_FALSE(checker.Check(users, ""));
}

// The daemons start with a file exactly when `promtool check web-config` accepts it (for the
// subset ringside implements; what ringside refuses beyond it is in docs/http-security.md).
TEST(WebConfigPromtoolTest, DaemonsAgreeWithPromtool) {
  testing::TempDir dir;
  auto pki = testing::TestPki::Create(dir.path(), "web");
  ASSERT_TRUE(pki.ok()) << pki.status();
  auto server = pki->IssueServer("server");
  ASSERT_TRUE(server.ok()) << server.status();
  auto other = pki->IssueServer("other");
  ASSERT_TRUE(other.ok()) << other.status();
  const std::string users = absl::StrCat("basic_auth_users:\n  prom: ", Bcrypt("pw", 5), "\n");
  const std::string tls = absl::StrCat("tls_server_config:\n  cert_file: ", server->cert,
                                       "\n  key_file: ", server->key, "\n");
  struct Case {
    std::string name;
    std::string yaml;
    bool valid;
  } cases[] = {
      {"empty", "", true},
      {"users only", users, true},
      {"tls", tls, true},
      {"mtls and all", absl::StrCat(tls, "  client_auth_type: RequireAndVerifyClientCert\n",
                                    "  client_ca_file: ", pki->ca_cert(), "\n",
                                    "  min_version: TLS12\n  max_version: TLS13\n",
                                    "  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384]\n",
                                    "http_server_config:\n  headers:\n",
                                    "    Strict-Transport-Security: max-age=31536000\n",
                                    "    X-Content-Type-Options: nosniff\n", users),
       true},
      {"relative paths", "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n",
       true},
      {"unknown top-level field", "tls_server_confg:\n  cert_file: a\n", false},
      {"unknown tls field", absl::StrCat(tls, "  cert_fiel: x\n"), false},
      {"CA without policy", absl::StrCat(tls, "  client_ca_file: ", pki->ca_cert(), "\n"), false},
      {"missing key", absl::StrCat("tls_server_config:\n  cert_file: ", server->cert, "\n"), false},
      {"key of another cert", absl::StrCat("tls_server_config:\n  cert_file: ", server->cert,
                                           "\n  key_file: ", other->key, "\n"),
       false},
      {"missing cert file", "tls_server_config:\n  cert_file: /nonexistent.pem\n  key_file: x\n",
       false},
      {"plaintext password", "basic_auth_users:\n  prom: pw\n", false},
      {"bad client auth", absl::StrCat(tls, "  client_auth_type: Maybe\n"), false},
      {"bad version", absl::StrCat(tls, "  min_version: SSL3\n"), false},
      {"bad cipher", absl::StrCat(tls, "  cipher_suites: [TLS_NOT_A_SUITE]\n"), false},
      {"bad header", "http_server_config:\n  headers:\n    X-Powered-By: me\n", false},
      {"bad header value", "http_server_config:\n  headers:\n    X-Frame-Options: allow\n", false},
      {"not yaml", "tls_server_config: [\n", false},
  };
  for (const Case& c : cases) {
    const std::string path = absl::StrCat(dir.path(), "/web-", &c - cases, ".yml");
    {
      std::ofstream f(path);
      f << c.yaml;
    }
    const absl::Status ours = CheckWebConfigFile(path);
    EXPECT_EQ(ours.ok(), c.valid) << c.name << ": " << ours;
    testing::RunResult r = testing::Run({"promtool", "check", "web-config", path}, "",
                                        absl::Seconds(20));
    if (r.exit_code == 127 || (r.exit_code != 0 && r.exit_code != 1)) {
      GTEST_SKIP() << "promtool is not usable here: " << r.err;
    }
    EXPECT_EQ(r.exit_code == 0, c.valid) << c.name << ": promtool says " << r.out << r.err;
  }
}

}  // namespace
}  // namespace ringside::daemon
