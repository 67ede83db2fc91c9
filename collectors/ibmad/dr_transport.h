// Directed-route SMP Gets: the seam between subnet discovery and libibmad.
//
// A directed-route SMP (management class 0x81, QP0) is forwarded hop by hop along an explicit
// list of egress ports instead of by LID, so it reaches nodes before (or without) a subnet
// manager's routing, and names a node by the path to it. Discovery (subnet_discovery.h) only
// sends Gets of NodeInfo, NodeDescription and PortInfo. Tests use a fake that answers from a
// modelled fabric.
#ifndef RINGSIDE_COLLECTORS_IBMAD_DR_TRANSPORT_H_
#define RINGSIDE_COLLECTORS_IBMAD_DR_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "collectors/ibmad/mad_fields.h"
#include "collectors/ibmad/mad_transport.h"

struct ibmad_port;

namespace ringside::collectors {

// The longest path a directed-route SMP can carry (IBA vol. 1 §14.2.2: 63 hops).
inline constexpr size_t kMaxDrHops = 63;

class DrSmpTransport {
 public:
  virtual ~DrSmpTransport() = default;
  // SMP Get of `attr` with modifier `mod` at the node reached by leaving the local port, then
  // each switch in turn, through the ports of `path` (empty: the local node itself). Fills `out`
  // with the 64 bytes of SMP data. Failures as MadTransport's (mad_transport.h): DeadlineExceeded
  // for no answer, Unimplemented / InvalidArgument / Unknown for a MAD status, Unavailable for a
  // local failure.
  virtual absl::Status SmpGetDr(absl::Span<const uint8_t> path, uint16_t attr, uint32_t mod,
                                MadData& out) = 0;
};

class LibibmadDrTransport final : public DrSmpTransport {
 public:
  // Opens the local port for directed-route SMPs (the same umad access as the fabric scan:
  // read/write on /dev/infiniband/umad*). Unavailable when there is no usable CA port.
  static absl::StatusOr<std::unique_ptr<LibibmadDrTransport>> Open(const MadPortOptions& options);
  // On a port shared with the fabric scan (mad_transport.h).
  static std::unique_ptr<LibibmadDrTransport> OnPort(std::shared_ptr<SharedIbmadPort> port) {
    return std::unique_ptr<LibibmadDrTransport>(new LibibmadDrTransport(std::move(port)));
  }
  ~LibibmadDrTransport() override = default;
  LibibmadDrTransport(const LibibmadDrTransport&) = delete;
  LibibmadDrTransport& operator=(const LibibmadDrTransport&) = delete;

  absl::Status SmpGetDr(absl::Span<const uint8_t> path, uint16_t attr, uint32_t mod,
                        MadData& out) override;

 private:
  explicit LibibmadDrTransport(std::shared_ptr<SharedIbmadPort> port) : port_(std::move(port)) {}
  std::shared_ptr<SharedIbmadPort> port_;
};

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_IBMAD_DR_TRANSPORT_H_
