// Where incidents are kept: an interface, an in-memory implementation (tests, --state-dir unset)
// and, in sqlite_incident_store.h, the SQLite one the aggregator uses.
#ifndef RINGSIDE_ANALYSIS_INCIDENT_STORE_H_
#define RINGSIDE_ANALYSIS_INCIDENT_STORE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "analysis/incidents.h"

namespace ringside::analysis {

struct IncidentQuery {
  bool open_only = false;
  std::optional<IncidentKind> kind;
  absl::Time since = absl::InfinitePast();  // updated at or after
  size_t limit = 100;                       // newest first (by id)
};

class IncidentStore {
 public:
  virtual ~IncidentStore() = default;
  // Inserts or replaces the incident with this id. Fails (AlreadyExists) when another incident with
  // the same key is open: there is never more than one open incident per key.
  virtual absl::Status Put(const Incident& incident) = 0;
  virtual absl::StatusOr<std::vector<Incident>> LoadOpen() = 0;
  // One above the highest id ever stored (1 for an empty store).
  virtual absl::StatusOr<uint64_t> NextId() = 0;
  virtual absl::StatusOr<std::optional<Incident>> Get(uint64_t id) = 0;
  virtual absl::StatusOr<std::vector<Incident>> List(const IncidentQuery& query) = 0;
};

// Thread-safe.
class MemoryIncidentStore : public IncidentStore {
 public:
  absl::Status Put(const Incident& incident) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::vector<Incident>> LoadOpen() override ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<uint64_t> NextId() override ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::optional<Incident>> Get(uint64_t id) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::vector<Incident>> List(const IncidentQuery& query) override
      ABSL_LOCKS_EXCLUDED(mu_);
  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  std::map<uint64_t, Incident> incidents_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

// Shared by the stores: does `q` select `inc`?
bool Matches(const IncidentQuery& q, const Incident& inc);

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_INCIDENT_STORE_H_
