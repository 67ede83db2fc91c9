#include "collectors/ibmad/dr_transport.h"

#include <infiniband/mad.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace ringside::collectors {

absl::StatusOr<std::unique_ptr<LibibmadDrTransport>> LibibmadDrTransport::Open(
    const MadPortOptions& options) {
  const int classes[] = {IB_SMI_CLASS, IB_SMI_DIRECT_CLASS};
  absl::StatusOr<ibmad_port*> port = OpenIbmadPort(options, classes, "directed-route SMPs");
  if (!port.ok()) return port.status();
  return OnPort(std::make_shared<SharedIbmadPort>(*port));
}

absl::Status LibibmadDrTransport::SmpGetDr(absl::Span<const uint8_t> path, uint16_t attr,
                                           uint32_t mod, MadData& out) {
  out.fill(0);
  if (path.size() > kMaxDrHops) {
    return absl::InvalidArgumentError(
        absl::StrCat("directed route of ", path.size(), " hops (at most ", kMaxDrHops, ")"));
  }
  // The path as libibmad keeps it: p[0] is the (unused) initial entry, p[1..cnt] the egress
  // ports; drslid / drdlid are the permissive LID (a purely directed route both ways).
  ib_portid_t dport;
  std::memset(&dport, 0, sizeof(dport));
  dport.lid = 0;
  dport.drpath.cnt = static_cast<int>(path.size());
  dport.drpath.p[0] = 0;
  for (size_t i = 0; i < path.size(); ++i) dport.drpath.p[i + 1] = path[i];
  dport.drpath.drslid = 0xffff;
  dport.drpath.drdlid = 0xffff;

  ib_rpc_v1_t rpc;
  std::memset(&rpc, 0, sizeof(rpc));
  rpc.mgtclass = IB_SMI_DIRECT_CLASS | IB_MAD_RPC_VERSION1;
  rpc.method = IB_MAD_METHOD_GET;
  rpc.attr.id = attr;
  rpc.attr.mod = mod;
  rpc.timeout = 0;  // the port's timeout
  rpc.datasz = IB_SMP_DATA_SIZE;
  rpc.dataoffs = IB_SMP_DATA_OFFS;
  rpc.mkey = smp_mkey_get(port_->port);

  uint8_t payload[IB_MAD_SIZE];
  std::memset(payload, 0, sizeof(payload));
  void* got;
  {
    absl::MutexLock lock(&port_->mu);
    got = mad_rpc(port_->port, reinterpret_cast<ib_rpc_t*>(&rpc), &dport, payload, out.data());
  }
  if (got != nullptr) return absl::OkStatus();
  const std::string what = absl::StrFormat("DR SMP Get attr 0x%02x mod %u via path [%s]", attr,
                                           mod, absl::StrJoin(path, ","));
  if (rpc.rstatus != 0) return MadStatusToStatus(static_cast<uint16_t>(rpc.rstatus), what);
  if (rpc.error == ETIMEDOUT) return absl::DeadlineExceededError(absl::StrCat(what, ": no response"));
  if (rpc.error != 0) {
    return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(rpc.error)));
  }
  return absl::UnavailableError(absl::StrCat(what, ": not sent"));
}

}  // namespace ringside::collectors
