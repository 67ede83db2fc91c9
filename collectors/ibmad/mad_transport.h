// Sending Get MADs to LIDs of the fabric: the seam between the fabric scan and libibmad.
//
// The scan needs two kinds of query, both LID-routed from a local CA port:
//  - SMP Get (management class 0x01, QP0): NodeInfo, NodeDescription, PortInfo;
//  - PMA Get (performance class 0x04, QP1): ClassPortInfo, PortCounters, PortCountersExtended.
// LibibmadTransport sends them with libibmad's mad_rpc (the call under pma_query_via and
// smp_query_via, used directly so that both the transport error and the MAD status are seen).
// Tests use a fake that answers from bytes.
#ifndef RINGSIDE_COLLECTORS_IBMAD_MAD_TRANSPORT_H_
#define RINGSIDE_COLLECTORS_IBMAD_MAD_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "collectors/ibmad/mad_fields.h"

struct ibmad_port;

namespace ringside::collectors {

// Attribute ids the scan uses (IBA vol. 1 §14.2.5 and §16.1.3).
inline constexpr uint16_t kAttrNodeDescription = 0x10;
inline constexpr uint16_t kAttrNodeInfo = 0x11;
inline constexpr uint16_t kAttrPortInfo = 0x15;
inline constexpr uint16_t kAttrClassPortInfo = 0x01;
inline constexpr uint16_t kAttrPortCounters = 0x12;
inline constexpr uint16_t kAttrPortCountersExtended = 0x1D;

class MadTransport {
 public:
  virtual ~MadTransport() = default;

  // SMP Get of `attr` with attribute modifier `mod` (the port for PortInfo) at `lid`. Fills `out`
  // with the 64 bytes of SMP data (the rest zero).
  virtual absl::Status SmpGet(uint16_t lid, uint16_t attr, uint32_t mod, MadData& out) = 0;

  // PMA Get of `attr` at `lid` with PortSelect = `port`. Fills `out` with the 192 bytes of
  // attribute data (the rest zero).
  virtual absl::Status PmaGet(uint16_t lid, uint16_t attr, uint8_t port, MadData& out) = 0;
};

// How failures are reported, by both the real transport and fakes:
//  - no answer after every attempt: DeadlineExceeded (the node or the path is gone);
//  - an answer with a non-zero MAD status: Unimplemented for "method or attribute not supported"
//    (status codes 2 and 3), InvalidArgument for "invalid attribute value / modifier" (7),
//    Unknown for any other status; the message carries the status;
//  - a local failure (no port, send failed): Unavailable.
absl::Status MadStatusToStatus(uint16_t mad_status, absl::string_view what);

struct MadPortOptions {
  // The local CA and port the MADs leave from; empty / 0: the first CA and its first active port
  // (libibumad's choice, as for perfquery without -C/-P).
  std::string ca_name;
  int ca_port = 0;
  // Per attempt. An unreachable LID costs timeout × (1 + retries) per query.
  absl::Duration timeout = absl::Milliseconds(200);
  int retries = 1;
};

// Opens the local CA port for the management `classes` (IB_SMI_CLASS, ...) with `options`'
// timeout and retries. Unavailable, naming the CA and `what` the MADs are for, when there is no
// usable port (no umad device, no permission on /dev/infiniband/umad*). Close with
// mad_rpc_close_port.
absl::StatusOr<ibmad_port*> OpenIbmadPort(const MadPortOptions& options,
                                          absl::Span<const int> classes, absl::string_view what);

// A libibmad port used by one or more transports (the agent's fabric scan and its subnet
// discovery share one: a second umad port of the same CA in one process is not needed, and ibsim's
// umad emulation does not serve two). libibmad matches a response to its request by TID on the
// port's one fd, so MADs from two threads must not interleave: each holds `mu` for its rpc.
struct SharedIbmadPort {
  explicit SharedIbmadPort(ibmad_port* p) : port(p) {}
  ~SharedIbmadPort();
  SharedIbmadPort(const SharedIbmadPort&) = delete;
  SharedIbmadPort& operator=(const SharedIbmadPort&) = delete;
  ibmad_port* const port;
  absl::Mutex mu;
};
// Opens a port for every class the scan and discovery send (SMI, directed-route SMI, SA, PerfMgt).
absl::StatusOr<std::shared_ptr<SharedIbmadPort>> OpenSharedIbmadPort(const MadPortOptions& options);

class LibibmadTransport final : public MadTransport {
 public:
  // Opens the local port for SMI (LID-routed) and PerfMgt MADs. Fails with Unavailable when
  // there is no usable CA port (no umad device, no permission on /dev/infiniband/umad*).
  static absl::StatusOr<std::unique_ptr<LibibmadTransport>> Open(const MadPortOptions& options);
  // On a port shared with other transports.
  static std::unique_ptr<LibibmadTransport> OnPort(std::shared_ptr<SharedIbmadPort> port) {
    return std::unique_ptr<LibibmadTransport>(new LibibmadTransport(std::move(port)));
  }
  ~LibibmadTransport() override = default;
  LibibmadTransport(const LibibmadTransport&) = delete;
  LibibmadTransport& operator=(const LibibmadTransport&) = delete;

  absl::Status SmpGet(uint16_t lid, uint16_t attr, uint32_t mod, MadData& out) override;
  absl::Status PmaGet(uint16_t lid, uint16_t attr, uint8_t port, MadData& out) override;

 private:
  explicit LibibmadTransport(std::shared_ptr<SharedIbmadPort> port) : port_(std::move(port)) {}
  absl::Status Get(int mgmt_class, uint16_t lid, uint16_t attr, uint32_t mod, MadData& inout);

  std::shared_ptr<SharedIbmadPort> port_;
};

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_IBMAD_MAD_TRANSPORT_H_
