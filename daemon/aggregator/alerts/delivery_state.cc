#include "daemon/aggregator/alerts/delivery_state.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ringside::daemon {
namespace {

constexpr absl::string_view kHeader = "ringside-alert-delivery-state 1";

std::optional<analysis::IncidentChangeType> ParseType(absl::string_view s) {
  if (s == "opened") return analysis::IncidentChangeType::kOpened;
  if (s == "updated") return analysis::IncidentChangeType::kUpdated;
  if (s == "resolved") return analysis::IncidentChangeType::kResolved;
  return std::nullopt;
}

absl::Status Errno(absl::string_view what, const std::string& path) {
  return absl::Status(
      errno == ENOSPC ? absl::StatusCode::kResourceExhausted : absl::StatusCode::kInternal,
      absl::StrCat(what, " ", path, ": ", strerror(errno)));
}

}  // namespace

std::string SerializeDeliveryState(const DeliveryMap& map) {
  std::string out = absl::StrCat(kHeader, "\n");
  for (const auto& [receiver, entries] : map) {
    for (const auto& [id, r] : entries) {
      absl::StrAppend(&out, receiver, "\t", id, "\t", r.revision, "\t",
                      analysis::IncidentChangeTypeName(r.type), "\t", absl::ToUnixSeconds(r.at),
                      "\n");
    }
  }
  return out;
}

absl::StatusOr<DeliveryMap> ParseDeliveryState(absl::string_view text) {
  DeliveryMap map;
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  if (lines.empty()) return map;
  if (lines[0] != kHeader) {
    return absl::DataLossError(
        absl::StrCat("not a delivery state file (header \"", lines[0].substr(0, 60), "\")"));
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<absl::string_view> f = absl::StrSplit(lines[i], '\t');
    uint64_t id = 0;
    DeliveryRecord r;
    int64_t at = 0;
    std::optional<analysis::IncidentChangeType> type;
    if (f.size() != 5 || f[0].empty() || !absl::SimpleAtoi(f[1], &id) ||
        !absl::SimpleAtoi(f[2], &r.revision) || !(type = ParseType(f[3])) ||
        !absl::SimpleAtoi(f[4], &at)) {
      return absl::DataLossError(
          absl::StrCat("line ", i + 1, " of the delivery state is malformed"));
    }
    r.type = *type;
    r.at = absl::FromUnixSeconds(at);
    map[std::string(f[0])][id] = r;
  }
  return map;
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view content) {
  const std::string tmp = absl::StrCat(path, ".tmp");
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Errno("cannot create", tmp);
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      absl::Status s = Errno("cannot write", tmp);
      close(fd);
      unlink(tmp.c_str());
      return s;
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) {
    absl::Status s = Errno("cannot sync", tmp);
    close(fd);
    unlink(tmp.c_str());
    return s;
  }
  close(fd);
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    absl::Status s = Errno("cannot rename to", path);
    unlink(tmp.c_str());
    return s;
  }
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  const int dfd = open(dir.empty() ? "/" : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)fsync(dfd);
    close(dfd);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<DeliveryState>> DeliveryState::Open(std::string path) {
  std::unique_ptr<DeliveryState> s(new DeliveryState(std::move(path)));
  if (s->path_.empty()) return s;
  std::ifstream in(s->path_, std::ios::binary);
  if (!in) {
    if (access(s->path_.c_str(), F_OK) != 0) return s;  // first start
    return absl::PermissionDeniedError(absl::StrCat("cannot read ", s->path_));
  }
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<DeliveryMap> map = ParseDeliveryState(text.str());
  if (!map.ok()) {
    return absl::Status(map.status().code(), absl::StrCat(s->path_, ": ", map.status().message()));
  }
  absl::MutexLock l(&s->mu_);
  s->map_ = std::move(*map);
  return s;
}

std::optional<DeliveryRecord> DeliveryState::Get(const std::string& receiver, uint64_t id) const {
  absl::MutexLock l(&mu_);
  auto r = map_.find(receiver);
  if (r == map_.end()) return std::nullopt;
  auto e = r->second.find(id);
  if (e == r->second.end()) return std::nullopt;
  return e->second;
}

std::vector<std::pair<uint64_t, DeliveryRecord>> DeliveryState::Entries(
    const std::string& receiver) const {
  absl::MutexLock l(&mu_);
  std::vector<std::pair<uint64_t, DeliveryRecord>> out;
  auto r = map_.find(receiver);
  if (r != map_.end()) out.assign(r->second.begin(), r->second.end());
  return out;
}

bool DeliveryState::Delivered(const std::string& receiver, uint64_t id, uint64_t revision) const {
  std::optional<DeliveryRecord> r = Get(receiver, id);
  return r.has_value() && r->revision >= revision;
}

absl::Status DeliveryState::Record(const std::string& receiver, uint64_t id,
                                   DeliveryRecord record) {
  return RecordAll(receiver, {{id, record}});
}

absl::Status DeliveryState::RecordAll(
    const std::string& receiver, const std::vector<std::pair<uint64_t, DeliveryRecord>>& records) {
  {
    absl::MutexLock l(&mu_);
    bool changed = false;
    for (const auto& [id, record] : records) {
      DeliveryRecord& slot = map_[receiver][id];
      if (slot.revision > record.revision || slot == record) continue;
      slot = record;
      changed = true;
    }
    if (!changed) return absl::OkStatus();
    ++version_;
  }
  return Persist();
}

absl::Status DeliveryState::Forget(const std::string& receiver, uint64_t id) {
  {
    absl::MutexLock l(&mu_);
    auto r = map_.find(receiver);
    if (r == map_.end() || r->second.erase(id) == 0) return absl::OkStatus();
    if (r->second.empty()) map_.erase(r);
    ++version_;
  }
  return Persist();
}

void DeliveryState::Prune(absl::Time before) {
  absl::MutexLock l(&mu_);
  for (auto r = map_.begin(); r != map_.end();) {
    auto& entries = r->second;
    for (auto it = entries.begin(); it != entries.end();) {
      if (it->second.type == analysis::IncidentChangeType::kResolved && it->second.at < before) {
        it = entries.erase(it);
        ++version_;
      } else {
        ++it;
      }
    }
    r = entries.empty() ? map_.erase(r) : std::next(r);
  }
}

DeliveryMap DeliveryState::Snapshot() const {
  absl::MutexLock l(&mu_);
  return map_;
}

absl::Status DeliveryState::Persist() {
  if (path_.empty()) return absl::OkStatus();
  absl::MutexLock w(&write_mu_);
  std::string text;
  uint64_t version = 0;
  {
    absl::MutexLock l(&mu_);
    version = version_;
    if (version <= written_version_) return absl::OkStatus();  // a later write covered it
    text = SerializeDeliveryState(map_);
  }
  absl::Status s = WriteFileAtomically(path_, text);
  if (s.ok()) written_version_ = version;
  return s;
}

}  // namespace ringside::daemon
