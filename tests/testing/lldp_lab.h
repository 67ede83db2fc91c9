// Real lldpd daemons in network namespaces a test creates, cabled by veth pairs: the harness of the
// LLDP process tests (tests/integration/lldp_netns_test.cc, lldp_storm_test.cc). Each namespace
// runs its own lldpd with its own control socket in the lab's folder (a unix socket file, so an
// agent in any namespace can read it with --lldp-socket). Frames stay inside the namespaces. The
// destructor stops every lldpd and deletes every namespace it made.
#ifndef RINGSIDE_TESTS_TESTING_LLDP_LAB_H_
#define RINGSIDE_TESTS_TESTING_LLDP_LAB_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/testing/process.h"

namespace ringside::testing {

class LldpLab {
 public:
  // lldpd and lldpcli are installed (Debian's lldpd).
  static bool LldpdInstalled();

  // Sockets and lldpd's output go to `dir` (made world-readable: lldpcli is set-user-id _lldpd and
  // must reach the sockets).
  explicit LldpLab(std::string dir);
  ~LldpLab();
  LldpLab(const LldpLab&) = delete;
  LldpLab& operator=(const LldpLab&) = delete;

  // A namespace "<tag>-<pid>" with lo up; its name. FailedPrecondition when namespaces cannot be
  // made here (not root, no `ip netns`): the caller skips.
  absl::StatusOr<std::string> AddNamespace(const std::string& tag);

  // A veth pair: `host_if` in `host_ns` ↔ `switch_port` in `switch_ns`, both up; `switch_addr`
  // ("192.0.2.1/24", or empty) on the switch end becomes its LLDP management address.
  absl::Status Cable(const std::string& host_ns, const std::string& host_if,
                     const std::string& switch_ns, const std::string& switch_port,
                     const std::string& switch_addr = "");
  // Deletes `netdev` in `ns` (and so its veth peer).
  absl::Status Uncable(const std::string& ns, const std::string& netdev);

  // lldpd in `ns` on the interfaces matching `pattern`, with its own socket, system name
  // `name`, one frame a second and the interface name as port id (as switches send).
  absl::Status StartLldpd(const std::string& ns, const std::string& pattern,
                          const std::string& name);
  // SIGTERM to the lldpd of `ns`; waits for it to exit (bounded).
  absl::Status StopLldpd(const std::string& ns);

  // The control socket of the lldpd of `ns`.
  std::string Socket(const std::string& ns) const;
  // Waits until the lldpd of `ns` lists `neighbor` (a system name) on `netdev` (bounded).
  absl::Status WaitForNeighbor(const std::string& ns, const std::string& netdev,
                               const std::string& neighbor, absl::Duration timeout);

 private:
  std::string dir_;
  std::vector<std::string> namespaces_;
  std::map<std::string, std::unique_ptr<Process>> lldpd_;  // by namespace
};

}  // namespace ringside::testing

#endif  // RINGSIDE_TESTS_TESTING_LLDP_LAB_H_
