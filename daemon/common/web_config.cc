#include "daemon/common/web_config.h"

#include <openssl/ssl.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <exception>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ringside::daemon {
namespace {

absl::Status Invalid(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("web config: ", what));
}

// Refuses any key of `map` outside `known`; `where` names the map in the message.
absl::Status OnlyKnownKeys(const YAML::Node& map, const std::set<std::string>& known,
                           const std::string& where) {
  if (!map.IsMap()) return Invalid(absl::StrCat(where, " must be a mapping"));
  for (const auto& kv : map) {
    const std::string key = kv.first.as<std::string>();
    if (known.count(key) == 0) {
      return Invalid(absl::StrCat("field ", key, " not supported in ", where, " (supported: ",
                                  absl::StrJoin(known, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

std::string Scalar(const YAML::Node& n, const std::string& what, absl::Status* error) {
  if (n.IsNull()) return "";
  if (!n.IsScalar()) {
    *error = Invalid(absl::StrCat(what, " must be a string"));
    return "";
  }
  return n.as<std::string>();
}

std::string Resolve(const std::string& dir, const std::string& path) {
  if (path.empty() || path[0] == '/' || dir.empty()) return path;
  return absl::StrCat(dir, "/", path);
}

absl::StatusOr<int> TlsVersion(const std::string& v, const char* field) {
  if (v == "TLS10") return TLS1_VERSION;
  if (v == "TLS11") return TLS1_1_VERSION;
  if (v == "TLS12") return TLS1_2_VERSION;
  if (v == "TLS13") return TLS1_3_VERSION;
  return Invalid(absl::StrCat(field, ": unknown TLS version ", v, " (TLS10, TLS11, TLS12, TLS13)"));
}

absl::Status ParseTls(const YAML::Node& n, const std::string& dir, WebConfig* c) {
  absl::Status s = OnlyKnownKeys(n,
                                 {"cert_file", "key_file", "client_auth_type", "client_ca_file",
                                  "min_version", "max_version", "cipher_suites",
                                  "prefer_server_cipher_suites"},
                                 "tls_server_config");
  if (!s.ok()) return s;
  WebTlsConfig& t = c->tls_config;
  std::string auth, min, max;
  if (n["cert_file"]) t.cert_file = Resolve(dir, Scalar(n["cert_file"], "cert_file", &s));
  if (n["key_file"]) t.key_file = Resolve(dir, Scalar(n["key_file"], "key_file", &s));
  if (n["client_ca_file"]) {
    t.client_ca_file = Resolve(dir, Scalar(n["client_ca_file"], "client_ca_file", &s));
  }
  if (n["client_auth_type"]) auth = Scalar(n["client_auth_type"], "client_auth_type", &s);
  if (n["min_version"]) min = Scalar(n["min_version"], "min_version", &s);
  if (n["max_version"]) max = Scalar(n["max_version"], "max_version", &s);
  if (!s.ok()) return s;
  if (n["prefer_server_cipher_suites"]) {
    t.prefer_server_cipher_suites = n["prefer_server_cipher_suites"].as<bool>();
  }
  if (n["cipher_suites"] && !n["cipher_suites"].IsNull()) {
    if (!n["cipher_suites"].IsSequence()) return Invalid("cipher_suites must be a list");
    for (const auto& e : n["cipher_suites"]) {
      const std::string name = e.as<std::string>();
      // TLS 1.3 suites are valid names that, as in Go's crypto/tls, restrict nothing.
      if (name == "TLS_AES_128_GCM_SHA256" || name == "TLS_AES_256_GCM_SHA384" ||
          name == "TLS_CHACHA20_POLY1305_SHA256") {
        continue;
      }
      std::string iana = name;
      // Go's short names for the ChaCha20 suites.
      if (iana == "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305" ||
          iana == "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305") {
        iana += "_SHA256";
      }
      const char* ossl = OPENSSL_cipher_name(iana.c_str());
      if (ossl == nullptr || std::string(ossl) == "(NONE)") {
        return Invalid(absl::StrCat("cipher_suites: unknown or unsupported cipher suite ", name));
      }
      t.cipher_suites.push_back(ossl);
    }
  }
  if (!min.empty()) {
    absl::StatusOr<int> v = TlsVersion(min, "min_version");
    if (!v.ok()) return v.status();
    t.min_version = *v;
  }
  if (!max.empty()) {
    absl::StatusOr<int> v = TlsVersion(max, "max_version");
    if (!v.ok()) return v.status();
    t.max_version = *v;
  }
  if (t.min_version > t.max_version) return Invalid("min_version is above max_version");
  if (t.cert_file.empty() && t.key_file.empty() && auth.empty() && t.client_ca_file.empty()) {
    return absl::OkStatus();  // no TLS, as in exporter-toolkit
  }
  c->tls = true;
  if (t.cert_file.empty()) return Invalid("tls_server_config: missing cert_file");
  if (t.key_file.empty()) return Invalid("tls_server_config: missing key_file");
  if (auth.empty() || auth == "NoClientCert") {
    t.client_auth = ClientAuth::kNone;
  } else if (auth == "VerifyClientCertIfGiven") {
    t.client_auth = ClientAuth::kVerifyIfGiven;
  } else if (auth == "RequireAndVerifyClientCert") {
    t.client_auth = ClientAuth::kRequireAndVerify;
  } else if (auth == "RequestClientCert" || auth == "RequireAnyClientCert" ||
             auth == "RequireClientCert") {
    return Invalid(absl::StrCat("client_auth_type ", auth,
                                " accepts unverified certificates and is not supported: use "
                                "RequireAndVerifyClientCert or VerifyClientCertIfGiven"));
  } else {
    return Invalid(absl::StrCat("invalid client_auth_type: ", auth));
  }
  if (!t.client_ca_file.empty() && t.client_auth == ClientAuth::kNone) {
    return Invalid("client CA's have been configured without a Client Auth Policy");
  }
  if (t.client_ca_file.empty() && t.client_auth != ClientAuth::kNone) {
    return Invalid(absl::StrCat("client_auth_type ", auth,
                                " needs client_ca_file (ringside never trusts the system store "
                                "for client certificates)"));
  }
  return absl::OkStatus();
}

absl::Status ParseHttp(const YAML::Node& n, WebConfig* c) {
  absl::Status s = OnlyKnownKeys(n, {"headers", "http2"}, "http_server_config");
  if (!s.ok()) return s;
  if (n["http2"] && n["http2"].as<bool>()) {
    return Invalid("http_server_config.http2: true is not supported (HTTP/1.1 only); remove it "
                   "or set it to false");
  }
  const YAML::Node h = n["headers"];
  if (!h || h.IsNull()) return absl::OkStatus();
  if (!h.IsMap()) return Invalid("http_server_config.headers must be a mapping");
  static const std::map<std::string, std::vector<std::string>> kAllowed = {
      {"Strict-Transport-Security", {}},
      {"Content-Security-Policy", {}},
      {"X-XSS-Protection", {}},
      {"X-Content-Type-Options", {"nosniff"}},
      {"X-Frame-Options", {"deny", "sameorigin"}},
  };
  for (const auto& kv : h) {
    const std::string key = kv.first.as<std::string>();
    const std::string value = kv.second.IsNull() ? "" : kv.second.as<std::string>();
    auto it = kAllowed.find(key);
    if (it == kAllowed.end()) return Invalid(absl::StrCat("HTTP header ", key, " can not be configured"));
    if (!it->second.empty() &&
        std::find(it->second.begin(), it->second.end(), value) == it->second.end()) {
      return Invalid(absl::StrCat("invalid value for ", key, ": expected one of ",
                                  absl::StrJoin(it->second, ", "), ", got ", value));
    }
    if (value.find_first_of("\r\n") != std::string::npos) {
      return Invalid(absl::StrCat("header ", key, " has a line break"));
    }
    c->headers[key] = value;
  }
  return absl::OkStatus();
}

}  // namespace

bool IsBcryptHash(const std::string& hash) {
  if (hash.size() != 60 || hash[0] != '$' || hash[1] != '2') return false;
  if (hash[2] != 'a' && hash[2] != 'b' && hash[2] != 'y') return false;
  if (hash[3] != '$' || hash[6] != '$') return false;
  if (!std::isdigit(static_cast<unsigned char>(hash[4])) ||
      !std::isdigit(static_cast<unsigned char>(hash[5]))) {
    return false;
  }
  const int cost = (hash[4] - '0') * 10 + (hash[5] - '0');
  if (cost < 4 || cost > 31) return false;
  for (size_t i = 7; i < hash.size(); ++i) {
    const char ch = hash[i];
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '/') return false;
  }
  return true;
}

absl::StatusOr<WebConfig> ParseWebConfig(const std::string& text, const std::string& dir) {
  WebConfig c;
  try {
    YAML::Node root = YAML::Load(text);
    if (!root || root.IsNull()) return c;  // an empty file: plain HTTP, no users
    absl::Status s =
        OnlyKnownKeys(root, {"tls_server_config", "http_server_config", "basic_auth_users"},
                      "the web config");
    if (!s.ok()) return s;
    if (root["tls_server_config"] && !root["tls_server_config"].IsNull()) {
      s = ParseTls(root["tls_server_config"], dir, &c);
      if (!s.ok()) return s;
    }
    if (root["http_server_config"] && !root["http_server_config"].IsNull()) {
      s = ParseHttp(root["http_server_config"], &c);
      if (!s.ok()) return s;
    }
    const YAML::Node users = root["basic_auth_users"];
    if (users && !users.IsNull()) {
      if (!users.IsMap()) return Invalid("basic_auth_users must be a mapping user: bcrypt-hash");
      for (const auto& kv : users) {
        const std::string user = kv.first.as<std::string>();
        const std::string hash = kv.second.IsNull() ? "" : kv.second.as<std::string>();
        if (!IsBcryptHash(hash)) {
          return Invalid(absl::StrCat("basic_auth_users: the password of ", user,
                                      " is not a bcrypt hash (make one with htpasswd -nBC 10 ",
                                      user, ")"));
        }
        if (user.find(':') != std::string::npos) {
          return Invalid(absl::StrCat("basic_auth_users: user name ", user, " has a colon"));
        }
        c.basic_auth_users[user] = hash;
      }
    }
  } catch (const std::exception& e) {
    return Invalid(e.what());
  }
  return c;
}

absl::StatusOr<WebConfig> ReadWebConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read web config ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  absl::StatusOr<WebConfig> c = ParseWebConfig(ss.str(), dir);
  if (!c.ok()) {
    return absl::Status(c.status().code(), absl::StrCat(path, ": ", c.status().message()));
  }
  return c;
}

}  // namespace ringside::daemon
