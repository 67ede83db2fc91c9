#include "tests/testing/certs.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "tests/testing/process.h"

namespace ringside::testing {
namespace {

absl::Status Openssl(std::vector<std::string> args) {
  args.insert(args.begin(), "openssl");
  RunResult r = Run(args, "", absl::Seconds(60));
  if (r.exit_code != 0) {
    return absl::InternalError(absl::StrCat("openssl ", args[1], " failed: ", r.err));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TestPki> TestPki::Create(const std::string& dir, const std::string& ca_name) {
  TestPki pki;
  pki.dir_ = dir;
  pki.ca_.cert = absl::StrCat(dir, "/", ca_name, "-ca.pem");
  pki.ca_.key = absl::StrCat(dir, "/", ca_name, "-ca.key");
  absl::Status s = Openssl({"req", "-x509", "-newkey", "ec", "-pkeyopt",
                            "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", pki.ca_.key,
                            "-out", pki.ca_.cert, "-days", "2", "-subj",
                            absl::StrCat("/CN=", ca_name, " test CA"), "-addext",
                            "basicConstraints=critical,CA:TRUE", "-addext",
                            "keyUsage=critical,keyCertSign,cRLSign"});
  if (!s.ok()) return s;
  return pki;
}

absl::StatusOr<CertPaths> TestPki::Issue(const std::string& name, const std::string& subject,
                                         const std::string& san, const std::string& usage) {
  CertPaths out{absl::StrCat(dir_, "/", name, ".pem"), absl::StrCat(dir_, "/", name, ".key")};
  const std::string csr = absl::StrCat(dir_, "/", name, ".csr");
  const std::string ext = absl::StrCat(dir_, "/", name, ".ext");
  {
    std::ofstream e(ext);
    e << "subjectAltName=" << san << "\nextendedKeyUsage=" << usage
      << "\nbasicConstraints=CA:FALSE\n";
  }
  absl::Status s = Openssl({"req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                            "-nodes", "-keyout", out.key, "-out", csr, "-subj", subject});
  if (!s.ok()) return s;
  s = Openssl({"x509", "-req", "-in", csr, "-CA", ca_.cert, "-CAkey", ca_.key, "-CAcreateserial",
               "-out", out.cert, "-days", "2", "-extfile", ext});
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<CertPaths> TestPki::IssueServer(const std::string& name) {
  return Issue(name, "/CN=" + name, "IP:127.0.0.1,IP:::1,DNS:localhost", "serverAuth");
}

absl::StatusOr<CertPaths> TestPki::IssueClient(const std::string& common_name) {
  return Issue("client-" + common_name, "/CN=" + common_name, "DNS:" + common_name, "clientAuth");
}

}  // namespace ringside::testing
