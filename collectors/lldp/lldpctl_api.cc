#include "collectors/lldp/lldpctl_api.h"

#include <dlfcn.h>

#include <map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace ringside::collectors {

absl::StatusOr<const LldpctlApi*> LoadLldpctl(const std::string& library) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* loaded = new std::map<std::string, LldpctlApi>();  // never freed: kept for good
  absl::MutexLock lock(&mu);
  if (auto it = loaded->find(library); it != loaded->end()) return &it->second;

  dlerror();
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return absl::NotFoundError(absl::StrCat(library, " cannot be loaded (lldpd not installed?): ",
                                            why ? why : "dlopen failed"));
  }
  LldpctlApi api;
  struct Entry {
    const char* symbol;
    void** slot;
  };
  // Function pointers and void* share a representation on every platform dlsym works on.
  const Entry entries[] = {
      {"lldpctl_new", reinterpret_cast<void**>(&api.new_conn)},
      {"lldpctl_release", reinterpret_cast<void**>(&api.release)},
      {"lldpctl_last_error", reinterpret_cast<void**>(&api.last_error)},
      {"lldpctl_strerror", reinterpret_cast<void**>(&api.strerror)},
      {"lldpctl_log_callback", reinterpret_cast<void**>(&api.log_callback)},
      {"lldpctl_get_interfaces", reinterpret_cast<void**>(&api.get_interfaces)},
      {"lldpctl_get_port", reinterpret_cast<void**>(&api.get_port)},
      {"lldpctl_atom_get", reinterpret_cast<void**>(&api.atom_get)},
      {"lldpctl_atom_get_str", reinterpret_cast<void**>(&api.atom_get_str)},
      {"lldpctl_atom_get_int", reinterpret_cast<void**>(&api.atom_get_int)},
      {"lldpctl_atom_dec_ref", reinterpret_cast<void**>(&api.atom_dec_ref)},
      {"lldpctl_atom_iter", reinterpret_cast<void**>(&api.atom_iter)},
      {"lldpctl_atom_iter_next", reinterpret_cast<void**>(&api.atom_iter_next)},
      {"lldpctl_atom_iter_value", reinterpret_cast<void**>(&api.atom_iter_value)},
  };
  for (const Entry& e : entries) {
    *e.slot = dlsym(handle, e.symbol);
    if (*e.slot == nullptr) {
      dlclose(handle);
      return absl::UnimplementedError(absl::StrCat(library, " has no ", e.symbol));
    }
  }
  api.log_callback([](int, const char*) {});
  return &loaded->emplace(library, api).first->second;
}

}  // namespace ringside::collectors
