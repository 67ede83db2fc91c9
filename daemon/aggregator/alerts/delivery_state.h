// What each alert receiver has been sent, kept across restarts: per receiver and incident, the
// last delivered revision and change type. A file (<state-dir>/alert_delivery_state) rewritten
// atomically (temp file, fsync, rename, fsync of the folder) after each delivery; memory only
// without a path. After a restart the senders compare it with the open incidents: what was
// delivered is not sent again, what was not is.
//
// File format, one line per entry after a header line:
//   ringside-alert-delivery-state 1
//   <receiver key>\t<incident id>\t<revision>\t<opened|updated|resolved>\t<unix seconds>
// Thread-safe.
#ifndef RINGSIDE_DAEMON_AGGREGATOR_ALERTS_DELIVERY_STATE_H_
#define RINGSIDE_DAEMON_AGGREGATOR_ALERTS_DELIVERY_STATE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "analysis/incidents.h"

namespace ringside::daemon {

struct DeliveryRecord {
  uint64_t revision = 0;
  analysis::IncidentChangeType type = analysis::IncidentChangeType::kOpened;
  absl::Time at;  // when it was delivered
  bool operator==(const DeliveryRecord&) const = default;
};

// receiver key → incident id → record.
using DeliveryMap = std::map<std::string, std::map<uint64_t, DeliveryRecord>>;

std::string SerializeDeliveryState(const DeliveryMap& map);
// DataLoss naming the line for anything malformed.
absl::StatusOr<DeliveryMap> ParseDeliveryState(absl::string_view text);

class DeliveryState {
 public:
  // Loads `path` if it exists (empty path: memory only). An unreadable or malformed file is an
  // error (the caller decides; the aggregator moves it aside and starts empty).
  static absl::StatusOr<std::unique_ptr<DeliveryState>> Open(std::string path);

  std::optional<DeliveryRecord> Get(const std::string& receiver, uint64_t id) const
      ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<std::pair<uint64_t, DeliveryRecord>> Entries(const std::string& receiver) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Whether `revision` (or a later one) of incident `id` reached `receiver`.
  bool Delivered(const std::string& receiver, uint64_t id, uint64_t revision) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Records a delivery (keeps the higher revision) and writes the file. The file is written
  // outside the lock that readers (Get, Delivered) take, so they never wait for the disk.
  absl::Status Record(const std::string& receiver, uint64_t id, DeliveryRecord record)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Several at once, one write.
  absl::Status RecordAll(const std::string& receiver,
                         const std::vector<std::pair<uint64_t, DeliveryRecord>>& records)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Forgets an entry (nothing more will be sent for it) and writes the file.
  absl::Status Forget(const std::string& receiver, uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);
  // Drops resolved entries delivered before `before` (nothing can be sent for them again: ids are
  // never reused); written with the next change.
  void Prune(absl::Time before) ABSL_LOCKS_EXCLUDED(mu_);

  const std::string& path() const { return path_; }
  DeliveryMap Snapshot() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  explicit DeliveryState(std::string path) : path_(std::move(path)) {}
  // Writes the map as of now (call without mu_ held).
  absl::Status Persist() ABSL_LOCKS_EXCLUDED(mu_, write_mu_);

  const std::string path_;
  mutable absl::Mutex mu_;
  DeliveryMap map_ ABSL_GUARDED_BY(mu_);
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;  // bumped on every change
  absl::Mutex write_mu_;                       // taken before mu_
  uint64_t written_version_ ABSL_GUARDED_BY(write_mu_) = 0;
};

// Writes `content` to `path` atomically: `path`.tmp, fsync, rename, fsync of the folder.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view content);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_ALERTS_DELIVERY_STATE_H_
