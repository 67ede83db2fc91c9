#include "collectors/lldp/lldp_client.h"

#include <errno.h>
#include <lldpctl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <memory>
#include <mutex>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ringside::collectors {
namespace {

// liblldpctl prints its own warnings to stderr; the caller reports failures once, itself.
void QuietLldpctlLog() {
  static std::once_flag once;
  std::call_once(once, [] { lldpctl_log_callback([](int, const char*) {}); });
}

// Our own blocking socket with send/receive timeouts, instead of liblldpctl's default I/O
// (which waits forever on a stopped lldpd).
ssize_t SendCallback(lldpctl_conn_t*, const uint8_t* data, size_t length, void* user) {
  const int fd = *static_cast<int*>(user);
  ssize_t n = ::send(fd, data, length, MSG_NOSIGNAL);
  return n < 0 ? static_cast<ssize_t>(LLDPCTL_ERR_CALLBACK_FAILURE) : n;
}

ssize_t RecvCallback(lldpctl_conn_t*, const uint8_t* data, size_t length, void* user) {
  const int fd = *static_cast<int*>(user);
  ssize_t n = ::recv(fd, const_cast<uint8_t*>(data), length, 0);
  if (n == 0) return static_cast<ssize_t>(LLDPCTL_ERR_EOF);
  return n < 0 ? static_cast<ssize_t>(LLDPCTL_ERR_CALLBACK_FAILURE) : n;
}

struct AtomRef {
  void operator()(lldpctl_atom_t* a) const {
    if (a != nullptr) lldpctl_atom_dec_ref(a);
  }
};
using Atom = std::unique_ptr<lldpctl_atom_t, AtomRef>;

std::string Str(lldpctl_atom_t* atom, lldpctl_key_t key) {
  const char* s = lldpctl_atom_get_str(atom, key);
  return s == nullptr ? std::string() : std::string(s);
}

absl::Status ConnError(lldpctl_conn_t* conn, absl::string_view what, const std::string& path) {
  return absl::UnavailableError(
      absl::StrCat("lldpd at ", path, ": ", what, ": ", lldpctl_last_strerror(conn)));
}

// Fills the neighbour's fields (not netdev, not neighbors_on_port).
void ReadNeighbor(lldpctl_atom_t* remote, LldpNeighbor& n) {
  n.protocol = Str(remote, lldpctl_k_port_protocol);
  n.port_id_subtype = Str(remote, lldpctl_k_port_id_subtype);
  n.port_id = Str(remote, lldpctl_k_port_id);
  n.port_descr = Str(remote, lldpctl_k_port_descr);
  n.pvid = lldpctl_atom_get_int(remote, lldpctl_k_port_vlan_pvid);
  if (n.pvid < 0) n.pvid = 0;
  Atom vlans(lldpctl_atom_get(remote, lldpctl_k_port_vlans));
  if (vlans) {
    lldpctl_atom_t* vlan = nullptr;
    lldpctl_atom_foreach(vlans.get(), vlan) {
      if (!n.vlans.empty()) n.vlans += ",";
      absl::StrAppend(&n.vlans, lldpctl_atom_get_int(vlan, lldpctl_k_vlan_id));
      std::string name = Str(vlan, lldpctl_k_vlan_name);
      if (!name.empty()) absl::StrAppend(&n.vlans, ":", name);
    }
  }
  Atom chassis(lldpctl_atom_get(remote, lldpctl_k_port_chassis));
  if (!chassis) return;
  n.chassis_id_subtype = Str(chassis.get(), lldpctl_k_chassis_id_subtype);
  n.chassis_id = Str(chassis.get(), lldpctl_k_chassis_id);
  n.chassis_name = Str(chassis.get(), lldpctl_k_chassis_name);
  n.chassis_descr = Str(chassis.get(), lldpctl_k_chassis_descr);
  Atom mgmts(lldpctl_atom_get(chassis.get(), lldpctl_k_chassis_mgmt));
  if (mgmts) {
    lldpctl_atom_t* mgmt = nullptr;
    lldpctl_atom_foreach(mgmts.get(), mgmt) {
      if (n.mgmt_addr.empty()) n.mgmt_addr = Str(mgmt, lldpctl_k_mgmt_ip);
    }
  }
}

}  // namespace

absl::StatusOr<std::vector<LldpNeighbor>> ReadLldpNeighbors(const LldpClientOptions& options) {
  const std::string& path = options.socket_path;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("no lldpd socket at ", path));
    if (errno == EACCES) {
      return absl::PermissionDeniedError(absl::StrCat("cannot reach ", path, ": ", strerror(errno)));
    }
    return absl::UnavailableError(absl::StrCat("stat ", path, ": ", strerror(errno)));
  }
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket path too long: ", path));
  }
  addr.sun_family = AF_UNIX;
  ::memcpy(addr.sun_path, path.data(), path.size());
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  timeval tv = absl::ToTimeval(options.io_timeout);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int e = errno;
    std::string msg = absl::StrCat("connect ", path, ": ", strerror(e));
    if (e == EACCES || e == EPERM) return absl::PermissionDeniedError(msg);
    return absl::UnavailableError(msg);
  }

  QuietLldpctlLog();
  std::unique_ptr<lldpctl_conn_t, int (*)(lldpctl_conn_t*)> conn(
      lldpctl_new(SendCallback, RecvCallback, &closer.fd), lldpctl_release);
  if (!conn) return absl::ResourceExhaustedError("lldpctl_new failed");

  Atom interfaces(lldpctl_get_interfaces(conn.get()));
  if (!interfaces) return ConnError(conn.get(), "list interfaces", path);
  std::vector<LldpNeighbor> out;
  absl::Status failed;
  lldpctl_atom_t* iface = nullptr;
  lldpctl_atom_foreach(interfaces.get(), iface) {
    if (!failed.ok()) continue;  // finish the loop: it releases each value
    const std::string netdev = Str(iface, lldpctl_k_interface_name);
    Atom port(lldpctl_get_port(iface));
    if (!port) {
      failed = ConnError(conn.get(), absl::StrCat("read port ", netdev), path);
      continue;
    }
    Atom remotes(lldpctl_atom_get(port.get(), lldpctl_k_port_neighbors));
    if (!remotes) continue;
    const size_t first = out.size();
    lldpctl_atom_t* remote = nullptr;
    lldpctl_atom_foreach(remotes.get(), remote) {
      LldpNeighbor& n = out.emplace_back();
      n.netdev = netdev;
      ReadNeighbor(remote, n);
    }
    const int count = static_cast<int>(out.size() - first);
    for (size_t i = first; i < out.size(); ++i) out[i].neighbors_on_port = count;
  }
  if (!failed.ok()) return failed;
  return out;
}

}  // namespace ringside::collectors
