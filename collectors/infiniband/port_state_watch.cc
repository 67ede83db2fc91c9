#include "collectors/infiniband/port_state_watch.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "collectors/common/parse.h"

namespace ringside::collectors {

LinkState IbPortStateOf(absl::string_view text) {
  absl::StatusOr<IdAndName> s = ParseIdAndName(text);
  if (!s.ok()) return LinkState::kUnknown;
  if (s->id == 4 || s->id == 5) return LinkState::kUp;    // ACTIVE, ACTIVE_DEFER
  if (s->id >= 1 && s->id <= 3) return LinkState::kDown;  // DOWN, INIT, ARMED
  return LinkState::kUnknown;
}

PortStateWatcher::PortStateWatcher(PortStateWatchOptions options, FileSystem* fs)
    : options_(std::move(options)),
      fs_(fs),
      class_dir_(absl::StrCat(options_.sysfs_root, "/class/infiniband")) {}

void PortStateWatcher::Rescan() {
  for (auto& [key, port] : ports_) port->listed = false;
  absl::StatusOr<std::vector<DirEntry>> devices = fs_->List(class_dir_);
  if (devices.ok()) {
    for (const DirEntry& d : *devices) {
      if (!d.is_dir) continue;
      const std::string ports_dir = absl::StrCat(class_dir_, "/", d.name, "/ports");
      absl::StatusOr<std::vector<DirEntry>> ports = fs_->List(ports_dir);
      if (!ports.ok()) continue;
      for (const DirEntry& p : *ports) {
        if (!p.is_dir) continue;
        auto [it, added] = ports_.try_emplace(std::make_pair(d.name, p.name));
        if (added) {
          const std::string dir = absl::StrCat(ports_dir, "/", p.name);
          it->second = std::make_unique<Port>(fs_, dir + "/state");
          for (const std::string& c : options_.counters) {
            const std::string path = absl::StrCat(dir, "/counters/", c);
            if (fs_->ReadSmallFile(path).ok()) {
              it->second->counters.push_back(Port::Counter{PolledFile(fs_, path), {}});
            }
          }
        }
        it->second->listed = true;
      }
    }
  }
  // Gone for good: unlisted and last known down (a port that was up is first reported down by
  // its failed read in Poll, so no transition is lost).
  for (auto it = ports_.begin(); it != ports_.end();) {
    if (!it->second->listed && it->second->last != LinkState::kUp) {
      it = ports_.erase(it);
    } else {
      ++it;
    }
  }
}

void PortStateWatcher::Poll(absl::Time now, std::vector<LinkEvent>& out) {
  if (now >= next_rescan_) {
    Rescan();
    next_rescan_ = now + options_.rescan;
  }
  ++polls_;
  char buf[PolledFile::kMaxContent + 1];
  for (auto& [key, port] : ports_) {
    for (Port::Counter& c : port->counters) {
      absl::StatusOr<absl::string_view> v = c.file.Read(buf);
      if (!v.ok()) continue;  // the state read below tells of a removed device
      if (!c.last.empty() && *v != c.last) {
        counters_moved_ = true;
        ++counter_moves_;
      }
      c.last.assign(v->data(), v->size());
    }
    absl::StatusOr<absl::string_view> text = port->state.Read(buf);
    LinkState now_state;
    std::string detail;
    if (text.ok()) {
      now_state = IbPortStateOf(*text);
      if (now_state == LinkState::kUnknown) continue;  // a state this code does not know: no claim
      if (now_state == port->last) continue;
      detail = absl::StrCat("state ", FirstLine(*text));
      // phys_state tells why (Disabled, Polling, LinkUp): read once, only on a change.
      const std::string phys =
          absl::StrCat(class_dir_, "/", key.first, "/ports/", key.second, "/phys_state");
      if (absl::StatusOr<std::string> p = fs_->ReadSmallFile(phys); p.ok()) {
        absl::StrAppend(&detail, ", phys_state ", FirstLine(*p));
      }
    } else {
      ++read_failures_;
      if (port->last != LinkState::kUp) continue;
      now_state = LinkState::kDown;
      detail = absl::StrCat("state unreadable (device removed?): ", text.status().message());
    }
    const LinkState before = port->last;
    port->last = now_state;
    if (before == LinkState::kUnknown) continue;  // the first read: what it is, not a change
    out.push_back(LinkEvent{now, "sysfs", key.first, key.second, before, now_state,
                            std::move(detail)});
  }
}

}  // namespace ringside::collectors
