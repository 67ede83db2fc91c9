// Test PKI made with the openssl command line: CAs, a server certificate for 127.0.0.1/localhost,
// and client certificates whose common name is a node name.
#ifndef RINGSIDE_TESTS_TESTING_CERTS_H_
#define RINGSIDE_TESTS_TESTING_CERTS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringside::testing {

struct CertPaths {
  std::string cert;
  std::string key;
};

class TestPki {
 public:
  // Creates a CA named `ca_name` under `dir`.
  static absl::StatusOr<TestPki> Create(const std::string& dir, const std::string& ca_name);

  const std::string& ca_cert() const { return ca_.cert; }
  // A server certificate valid for 127.0.0.1, ::1 and localhost.
  absl::StatusOr<CertPaths> IssueServer(const std::string& name);
  // A client certificate with CN = `common_name` (and the same DNS SAN).
  absl::StatusOr<CertPaths> IssueClient(const std::string& common_name);

 private:
  absl::StatusOr<CertPaths> Issue(const std::string& name, const std::string& subject,
                                  const std::string& san, const std::string& usage);
  std::string dir_;
  CertPaths ca_;
};

}  // namespace ringside::testing

#endif  // RINGSIDE_TESTS_TESTING_CERTS_H_
