// liblldpctl loaded at run time (dlopen, never linked). Debian ships liblldpctl.so.4 inside the
// lldpd package itself, so linking it would make the agent's package depend on the whole daemon
// (and, through net-snmp, perl); loaded instead, it is there exactly when lldpd is. Types come
// from <lldpctl.h> (liblldpctl-dev, build time only).
#ifndef RINGSIDE_COLLECTORS_LLDP_LLDPCTL_API_H_
#define RINGSIDE_COLLECTORS_LLDP_LLDPCTL_API_H_

#include <lldpctl.h>

#include <string>

#include "absl/status/statusor.h"

namespace ringside::collectors {

inline constexpr char kLldpctlLibrary[] = "liblldpctl.so.4";

struct LldpctlApi {
  decltype(&::lldpctl_new) new_conn = nullptr;
  decltype(&::lldpctl_release) release = nullptr;
  decltype(&::lldpctl_last_error) last_error = nullptr;
  decltype(&::lldpctl_strerror) strerror = nullptr;
  decltype(&::lldpctl_log_callback) log_callback = nullptr;
  decltype(&::lldpctl_get_interfaces) get_interfaces = nullptr;
  decltype(&::lldpctl_get_port) get_port = nullptr;
  decltype(&::lldpctl_atom_get) atom_get = nullptr;
  decltype(&::lldpctl_atom_get_str) atom_get_str = nullptr;
  decltype(&::lldpctl_atom_get_int) atom_get_int = nullptr;
  decltype(&::lldpctl_atom_dec_ref) atom_dec_ref = nullptr;
  decltype(&::lldpctl_atom_iter) atom_iter = nullptr;
  decltype(&::lldpctl_atom_iter_next) atom_iter_next = nullptr;
  decltype(&::lldpctl_atom_iter_value) atom_iter_value = nullptr;
};

// The library, loaded once per process and kept (with its log output silenced: the collector
// reports failures itself). A failed load is tried again on the next call, so lldpd installed
// after the agent started is picked up. NotFound: the library cannot be loaded; Unimplemented: an
// entry point is missing.
absl::StatusOr<const LldpctlApi*> LoadLldpctl(const std::string& library = kLldpctlLibrary);

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_LLDP_LLDPCTL_API_H_
