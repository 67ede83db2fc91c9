#include "collectors/lldp/lldp_client.h"

#include <errno.h>
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
#include "collectors/lldp/lldpctl_api.h"

namespace ringside::collectors {
namespace {

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

// The library's calls, with atoms released by RAII and lists walked by a callback.
class Lib {
 public:
  explicit Lib(const LldpctlApi& api) : api_(api) {}

  struct Release {
    const LldpctlApi* api;
    void operator()(lldpctl_atom_t* a) const {
      if (a != nullptr) api->atom_dec_ref(a);
    }
  };
  using Atom = std::unique_ptr<lldpctl_atom_t, Release>;

  Atom Own(lldpctl_atom_t* a) const { return Atom(a, Release{&api_}); }
  Atom Get(lldpctl_atom_t* atom, lldpctl_key_t key) const { return Own(api_.atom_get(atom, key)); }
  std::string Str(lldpctl_atom_t* atom, lldpctl_key_t key) const {
    const char* s = api_.atom_get_str(atom, key);
    return s == nullptr ? std::string() : std::string(s);
  }
  long Int(lldpctl_atom_t* atom, lldpctl_key_t key) const { return api_.atom_get_int(atom, key); }
  // Calls f(value) for each element of a list atom.
  template <typename F>
  void ForEach(lldpctl_atom_t* list, F f) const {
    // As lldpctl_atom_foreach: the value is released after stepping to the next one.
    lldpctl_atom_iter_t* it = api_.atom_iter(list);
    while (it != nullptr) {
      lldpctl_atom_t* value = api_.atom_iter_value(list, it);
      if (value == nullptr) break;
      f(value);
      it = api_.atom_iter_next(list, it);
      api_.atom_dec_ref(value);
    }
  }
  absl::Status ConnError(lldpctl_conn_t* conn, absl::string_view what,
                         const std::string& path) const {
    return absl::UnavailableError(
        absl::StrCat("lldpd at ", path, ": ", what, ": ", api_.strerror(api_.last_error(conn))));
  }
  const LldpctlApi& api() const { return api_; }

 private:
  const LldpctlApi& api_;
};

// Fills the neighbour's fields (not netdev, not neighbors_on_port).
void ReadNeighbor(const Lib& lib, lldpctl_atom_t* remote, LldpNeighbor& n) {
  n.protocol = lib.Str(remote, lldpctl_k_port_protocol);
  n.port_id_subtype = lib.Str(remote, lldpctl_k_port_id_subtype);
  n.port_id = lib.Str(remote, lldpctl_k_port_id);
  n.port_descr = lib.Str(remote, lldpctl_k_port_descr);
  n.pvid = lib.Int(remote, lldpctl_k_port_vlan_pvid);
  if (n.pvid < 0) n.pvid = 0;
  if (Lib::Atom vlans = lib.Get(remote, lldpctl_k_port_vlans)) {
    lib.ForEach(vlans.get(), [&](lldpctl_atom_t* vlan) {
      if (!n.vlans.empty()) n.vlans += ",";
      absl::StrAppend(&n.vlans, lib.Int(vlan, lldpctl_k_vlan_id));
      std::string name = lib.Str(vlan, lldpctl_k_vlan_name);
      if (!name.empty()) absl::StrAppend(&n.vlans, ":", name);
    });
  }
  Lib::Atom chassis = lib.Get(remote, lldpctl_k_port_chassis);
  if (!chassis) return;
  n.chassis_id_subtype = lib.Str(chassis.get(), lldpctl_k_chassis_id_subtype);
  n.chassis_id = lib.Str(chassis.get(), lldpctl_k_chassis_id);
  n.chassis_name = lib.Str(chassis.get(), lldpctl_k_chassis_name);
  n.chassis_descr = lib.Str(chassis.get(), lldpctl_k_chassis_descr);
  if (Lib::Atom mgmts = lib.Get(chassis.get(), lldpctl_k_chassis_mgmt)) {
    lib.ForEach(mgmts.get(), [&](lldpctl_atom_t* mgmt) {
      if (n.mgmt_addr.empty()) n.mgmt_addr = lib.Str(mgmt, lldpctl_k_mgmt_ip);
    });
  }
}

}  // namespace

absl::StatusOr<std::vector<LldpNeighbor>> ReadLldpNeighbors(const LldpClientOptions& options) {
  const std::string& path = options.socket_path;
  absl::StatusOr<const LldpctlApi*> loaded = LoadLldpctl(options.library);
  if (!loaded.ok()) return loaded.status();
  const LldpctlApi* api = *loaded;
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

  // Atoms hold a reference to the connection: declared after it, released before it.
  std::unique_ptr<lldpctl_conn_t, decltype(api->release)> conn(
      api->new_conn(SendCallback, RecvCallback, &closer.fd), api->release);
  if (!conn) return absl::ResourceExhaustedError("lldpctl_new failed");
  const Lib lib(*api);

  Lib::Atom interfaces = lib.Own(api->get_interfaces(conn.get()));
  if (!interfaces) return lib.ConnError(conn.get(), "list interfaces", path);
  std::vector<LldpNeighbor> out;
  absl::Status failed;
  lib.ForEach(interfaces.get(), [&](lldpctl_atom_t* iface) {
    if (!failed.ok()) return;
    const std::string netdev = lib.Str(iface, lldpctl_k_interface_name);
    Lib::Atom port = lib.Own(api->get_port(iface));
    if (!port) {
      failed = lib.ConnError(conn.get(), absl::StrCat("read port ", netdev), path);
      return;
    }
    Lib::Atom remotes = lib.Get(port.get(), lldpctl_k_port_neighbors);
    if (!remotes) return;
    const size_t first = out.size();
    lib.ForEach(remotes.get(), [&](lldpctl_atom_t* remote) {
      LldpNeighbor& n = out.emplace_back();
      n.netdev = netdev;
      ReadNeighbor(lib, remote, n);
    });
    const int count = static_cast<int>(out.size() - first);
    for (size_t i = first; i < out.size(); ++i) out[i].neighbors_on_port = count;
  });
  if (!failed.ok()) return failed;
  return out;
}

}  // namespace ringside::collectors
