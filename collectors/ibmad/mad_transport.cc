#include "collectors/ibmad/mad_transport.h"

#include <infiniband/mad.h>

#include <algorithm>
#include <vector>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ringside::collectors {

absl::Status MadStatusToStatus(uint16_t mad_status, absl::string_view what) {
  if (mad_status == 0) return absl::OkStatus();
  const std::string msg = absl::StrFormat("%s: MAD status 0x%04x", what, mad_status);
  switch ((mad_status >> 2) & 0x7) {
    case 2:  // method not supported
    case 3:  // method/attribute combination not supported
      return absl::UnimplementedError(msg);
    case 7:  // invalid value in the attribute or modifier
      return absl::InvalidArgumentError(msg);
    default:
      return absl::UnknownError(msg);
  }
}

absl::StatusOr<ibmad_port*> OpenIbmadPort(const MadPortOptions& options,
                                          absl::Span<const int> classes, absl::string_view what) {
  std::string ca = options.ca_name;
  std::vector<int> cls(classes.begin(), classes.end());
  ibmad_port* port = mad_rpc_open_port(ca.empty() ? nullptr : ca.data(), options.ca_port,
                                       cls.data(), static_cast<int>(cls.size()));
  if (port == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "libibmad: cannot open CA port ", ca.empty() ? "(default)" : ca, ":", options.ca_port,
        " for ", what, " (no umad device, or no access to /dev/infiniband/umad*)"));
  }
  const int64_t timeout_ms = std::max<int64_t>(1, absl::ToInt64Milliseconds(options.timeout));
  mad_rpc_set_timeout(port, static_cast<int>(timeout_ms));
  // libibmad's "retries" is the number of attempts (0 means its default of 3).
  mad_rpc_set_retries(port, std::max(1, options.retries + 1));
  return port;
}

absl::StatusOr<std::unique_ptr<LibibmadTransport>> LibibmadTransport::Open(
    const MadPortOptions& options) {
  const int classes[] = {IB_SMI_CLASS, IB_SMI_DIRECT_CLASS, IB_SA_CLASS, IB_PERFORMANCE_CLASS};
  absl::StatusOr<ibmad_port*> port = OpenIbmadPort(options, classes, "MADs");
  if (!port.ok()) return port.status();
  return OnPort(std::make_shared<SharedIbmadPort>(*port));
}

SharedIbmadPort::~SharedIbmadPort() {
  if (port != nullptr) mad_rpc_close_port(port);
}

absl::StatusOr<std::shared_ptr<SharedIbmadPort>> OpenSharedIbmadPort(const MadPortOptions& options) {
  const int classes[] = {IB_SMI_CLASS, IB_SMI_DIRECT_CLASS, IB_SA_CLASS, IB_PERFORMANCE_CLASS};
  absl::StatusOr<ibmad_port*> port = OpenIbmadPort(options, classes, "MADs");
  if (!port.ok()) return port.status();
  return std::make_shared<SharedIbmadPort>(*port);
}

absl::Status LibibmadTransport::Get(int mgmt_class, uint16_t lid, uint16_t attr, uint32_t mod,
                                    MadData& inout) {
  const bool smp = mgmt_class == IB_SMI_CLASS;
  ib_rpc_v1_t rpc;
  std::memset(&rpc, 0, sizeof(rpc));
  rpc.mgtclass = mgmt_class | IB_MAD_RPC_VERSION1;
  rpc.method = IB_MAD_METHOD_GET;
  rpc.attr.id = attr;
  rpc.attr.mod = mod;
  rpc.timeout = 0;  // the port's timeout
  if (smp) {
    rpc.datasz = IB_SMP_DATA_SIZE;
    rpc.dataoffs = IB_SMP_DATA_OFFS;
    rpc.mkey = smp_mkey_get(port_->port);
  } else {
    rpc.datasz = IB_PC_DATA_SZ;
    rpc.dataoffs = IB_PC_DATA_OFFS;
  }
  ib_portid_t dport;
  std::memset(&dport, 0, sizeof(dport));
  ib_portid_set(&dport, lid, smp ? 0 : 1, smp ? 0 : IB_DEFAULT_QP1_QKEY);

  uint8_t payload[IB_MAD_SIZE];
  std::memcpy(payload, inout.data(), sizeof(payload));
  inout.fill(0);
  void* got;
  {
    absl::MutexLock lock(&port_->mu);
    got = mad_rpc(port_->port, reinterpret_cast<ib_rpc_t*>(&rpc), &dport, payload, inout.data());
  }
  const std::string what =
      absl::StrFormat("%s Get attr 0x%02x mod %u to LID %u", smp ? "SMP" : "PMA", attr, mod, lid);
  if (got != nullptr) return absl::OkStatus();
  if (rpc.rstatus != 0) return MadStatusToStatus(static_cast<uint16_t>(rpc.rstatus), what);
  if (rpc.error == ETIMEDOUT) {
    // libibmad reports a MAD that got no answer after every attempt as ETIMEDOUT.
    return absl::DeadlineExceededError(absl::StrCat(what, ": no response"));
  }
  if (rpc.error != 0) {
    return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(rpc.error)));
  }
  return absl::UnavailableError(absl::StrCat(what, ": not sent"));
}

absl::Status LibibmadTransport::SmpGet(uint16_t lid, uint16_t attr, uint32_t mod, MadData& out) {
  out.fill(0);
  return Get(IB_SMI_CLASS, lid, attr, mod, out);
}

absl::Status LibibmadTransport::PmaGet(uint16_t lid, uint16_t attr, uint8_t port, MadData& out) {
  out.fill(0);
  // PortSelect is in the request's attribute data (byte 1 of PortCounters and
  // PortCountersExtended); ClassPortInfo ignores it.
  mad_set_field(out.data(), 0, IB_PC_PORT_SELECT_F, port);
  return Get(IB_PERFORMANCE_CLASS, lid, attr, 0, out);
}

}  // namespace ringside::collectors
