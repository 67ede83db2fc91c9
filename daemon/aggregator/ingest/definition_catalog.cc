#include "daemon/aggregator/ingest/definition_catalog.h"

#include <utility>

#include "daemon/common/series_set_digest.h"

namespace ringside::daemon {

std::string DefinitionCatalog::DigestOf(absl::Span<const analysis::SeriesDefinitionRef> defs) {
  SeriesSetDigest digest;
  for (const analysis::SeriesDefinitionRef& d : defs) {
    DigestFields f;
    f.id = d.id;
    f.source = d.source;
    f.device = d.device;
    f.port = d.port;
    f.counter = d.counter;
    f.unit = d.unit;
    f.priority = d.priority;
    f.kind = static_cast<uint32_t>(d.kind);
    f.width = d.width;
    f.saturates = d.saturates;
    f.term_width = d.term_width;
    digest.Add(f);
  }
  return digest.Finish();
}

std::shared_ptr<const DefinitionSet> DefinitionCatalog::Find(absl::string_view digest) {
  absl::MutexLock l(&mu_);
  auto it = sets_.find(digest);
  if (it == sets_.end()) return nullptr;
  it->second.last_used = ++clock_;
  return it->second.set;
}

bool DefinitionCatalog::Contains(absl::string_view digest) const {
  absl::MutexLock l(&mu_);
  return sets_.contains(digest);
}

DefinitionCatalog::LearnResult DefinitionCatalog::Learn(absl::string_view digest,
                              absl::Span<const analysis::SeriesDefinitionRef> defs) {
  if (options_.max_sets == 0) return LearnResult::kNotKept;
  if (digest.size() != kSeriesSetDigestBytes || defs.empty()) return LearnResult::kMismatch;
  if (Contains(digest)) return LearnResult::kHeld;
  for (size_t i = 1; i < defs.size(); ++i) {
    if (defs[i].id <= defs[i - 1].id) return LearnResult::kMismatch;
  }
  // Checked and copied outside the lock: a set of 1,500 is ~60 KB to hash.
  if (DigestOf(defs) != digest) return LearnResult::kMismatch;
  auto set = std::make_shared<DefinitionSet>();
  set->digest = std::string(digest);
  set->defs.reserve(defs.size());
  size_t bytes = sizeof(DefinitionSet) + defs.size() * (sizeof(analysis::SeriesDefinition) +
                                                        sizeof(analysis::SeriesDefinitionRef));
  for (const analysis::SeriesDefinitionRef& r : defs) {
    const analysis::SeriesDefinition& d = set->defs.emplace_back(r.Owned());
    for (const std::string* s : {&d.source, &d.device, &d.port, &d.counter, &d.unit}) {
      if (s->size() >= sizeof(std::string)) bytes += s->capacity() + 1;  // past the inline buffer
    }
  }
  set->refs.reserve(set->defs.size());
  for (const analysis::SeriesDefinition& d : set->defs) {
    set->refs.push_back(analysis::SeriesDefinitionRef::Of(d));
  }
  set->identity_hints = std::make_unique<std::atomic<uint64_t>[]>(set->refs.size());  // zero
  bytes += set->refs.size() * sizeof(uint64_t);
  set->bytes = bytes;
  if (bytes > options_.max_bytes) return LearnResult::kNotKept;
  absl::MutexLock l(&mu_);
  auto [it, added] = sets_.try_emplace(set->digest);
  if (added) {
    it->second.set = std::move(set);
    bytes_ += bytes;
  }
  it->second.last_used = ++clock_;
  EvictLocked();
  return added ? LearnResult::kAdded : LearnResult::kHeld;
}

void DefinitionCatalog::EvictLocked() {
  while (!sets_.empty() && (sets_.size() > options_.max_sets || bytes_ > options_.max_bytes)) {
    auto oldest = sets_.begin();
    for (auto it = sets_.begin(); it != sets_.end(); ++it) {
      if (it->second.last_used < oldest->second.last_used) oldest = it;
    }
    bytes_ -= oldest->second.set->bytes;
    sets_.erase(oldest);
  }
}

size_t DefinitionCatalog::sets() const {
  absl::MutexLock l(&mu_);
  return sets_.size();
}

size_t DefinitionCatalog::bytes() const {
  absl::MutexLock l(&mu_);
  return bytes_;
}

}  // namespace ringside::daemon
