// Definitions by reference (docs/agent-upload.md): the definition sets this aggregator has received
// whole and checked, by digest (daemon/common/series_set_digest.h). A Hello that names a held set
// has its node's series defined from it, and its agent sends none of those definitions: after a
// restart of a cluster of identical nodes, one node in many sends its 1,500 definitions, the
// others a 32-byte digest.
//
// Bounded: at most max_sets sets and max_bytes of them; the set used least recently goes first.
// Any authenticated agent can add a set, but only one whose digest the aggregator computed itself
// from what it received, so a set found under a digest is exactly the set that digest names.
// Thread-safe.
#ifndef RINGSIDE_DAEMON_AGGREGATOR_INGEST_DEFINITION_CATALOG_H_
#define RINGSIDE_DAEMON_AGGREGATOR_INGEST_DEFINITION_CATALOG_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "analysis/series_state.h"

namespace ringside::daemon {

// One set: its definitions owned, and views of them for NodeSeries::DefineAll.
struct DefinitionSet {
  std::string digest;
  std::vector<analysis::SeriesDefinition> defs;
  std::vector<analysis::SeriesDefinitionRef> refs;  // into defs
  // SeriesIdentityPool's hints, one per definition: the identity handles the last node defined
  // from the set got, so the next takes them without hashing names (NodeSeries::DefineAll).
  // Written by whichever admission thread defines from the set (relaxed atomics).
  std::unique_ptr<std::atomic<uint64_t>[]> identity_hints;
  size_t bytes = 0;  // what the set holds, roughly

  absl::Span<std::atomic<uint64_t>> IdentityHints() const {
    return absl::MakeSpan(identity_hints.get(), identity_hints ? refs.size() : 0);
  }

  DefinitionSet() = default;
  DefinitionSet(const DefinitionSet&) = delete;
  DefinitionSet& operator=(const DefinitionSet&) = delete;
};

struct DefinitionCatalogOptions {
  size_t max_sets = 64;
  size_t max_bytes = size_t{64} << 20;
};

class DefinitionCatalog {
 public:
  explicit DefinitionCatalog(DefinitionCatalogOptions options = {}) : options_(options) {}

  // The set with this digest, or null.
  std::shared_ptr<const DefinitionSet> Find(absl::string_view digest) ABSL_LOCKS_EXCLUDED(mu_);
  bool Contains(absl::string_view digest) const ABSL_LOCKS_EXCLUDED(mu_);

  enum class LearnResult {
    kAdded,     // kept now
    kHeld,      // already held
    kMismatch,  // not kept: the digest is not that of `defs`, or the ids do not ascend
    kNotKept,   // not kept: off (max_sets 0), or the set alone is over max_bytes
  };
  // Keeps `defs` under `digest` when the digest computed over them (SeriesSetDigest, in order)
  // is `digest` and the ids ascend.
  LearnResult Learn(absl::string_view digest,
                    absl::Span<const analysis::SeriesDefinitionRef> defs) ABSL_LOCKS_EXCLUDED(mu_);

  size_t sets() const ABSL_LOCKS_EXCLUDED(mu_);
  size_t bytes() const ABSL_LOCKS_EXCLUDED(mu_);

  // The digest of `defs` as an agent computes it over the same definitions.
  static std::string DigestOf(absl::Span<const analysis::SeriesDefinitionRef> defs);

 private:
  struct Entry {
    std::shared_ptr<const DefinitionSet> set;
    uint64_t last_used = 0;
  };
  void EvictLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const DefinitionCatalogOptions options_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> sets_ ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t clock_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_INGEST_DEFINITION_CATALOG_H_
