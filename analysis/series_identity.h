// The identities of the aggregator's series — (source, device, port, counter, unit, priority) —
// interned once for all nodes and referenced by a 32-bit handle. A cluster runs a few kinds of
// hardware, so thousands of nodes share the same few thousand tuples, and each tuple's names are
// themselves interned strings. Both are reference counted: a tuple lives while a series refers to
// it, a name while a tuple does.
//
// Thread safety: Acquire, Release and the counts take the pool's lock. Get does not: a handle's
// tuple never moves and never changes while it is held, so a holder reads it without the lock
// (the pool's storage only grows; a grown directory is published atomically and the old one kept).
// AcquireMany, the admission path (a node's 1,500 definitions at once), hashes its keys before it
// takes the lock, finds the tuples already held under a shared (reader) lock, so that nodes of the
// same hardware are admitted in parallel, and takes the exclusive lock only for new tuples.
#ifndef RINGSIDE_ANALYSIS_SERIES_IDENTITY_H_
#define RINGSIDE_ANALYSIS_SERIES_IDENTITY_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

namespace ringside::analysis {

// One interned tuple. The names point at the pool's interned strings.
struct SeriesIdentity {
  const std::string* source = nullptr;
  const std::string* device = nullptr;
  const std::string* port = nullptr;
  const std::string* counter = nullptr;
  const std::string* unit = nullptr;
  int32_t priority = -1;
  // Series holding the tuple: raised under the pool's shared lock (AcquireMany), lowered and
  // freed under its exclusive lock.
  std::atomic<uint32_t> refs{0};
  // Counts the tuples this handle has stood for (from 1): (handle, generation) names one tuple
  // for the pool's lifetime, so callers may cache what they derive from a tuple by handle.
  uint32_t generation = 0;
  size_t hash = 0;  // of the tuple (SeriesIdentityPool::HashOf): the index never rehashes names
};

// What Acquire interns.
struct SeriesIdentityKey {
  absl::string_view source;
  absl::string_view device;
  absl::string_view port;
  absl::string_view counter;
  absl::string_view unit;
  int32_t priority = -1;
};

class SeriesIdentityPool {
 public:
  SeriesIdentityPool();
  ~SeriesIdentityPool();
  SeriesIdentityPool(const SeriesIdentityPool&) = delete;
  SeriesIdentityPool& operator=(const SeriesIdentityPool&) = delete;

  // A handle to the tuple, with one more reference.
  uint32_t Acquire(const SeriesIdentityKey& key) ABSL_LOCKS_EXCLUDED(mu_);
  // Acquire for each key: handles[i] for keys[i] (the same size). One shared-lock pass for the
  // tuples already held, one exclusive-lock pass for the others.
  void AcquireMany(absl::Span<const SeriesIdentityKey> keys, absl::Span<uint32_t> handles)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The same with a hint per key (null: none): the handle and generation (PackHint) a caller saw
  // for that key before. A hint that still names a held tuple is taken as it is — no hashing, no
  // lookup — and every hint is left naming the handle acquired. For a caller that defines the
  // same definitions again and again (a definition set, by reference): a node's 1,500 identities
  // at a reference count each instead of 1,500 hashes of five names. Hints may be read and
  // written by several threads at once (relaxed atomics): a stale one only costs the lookup.
  void AcquireMany(absl::Span<const SeriesIdentityKey> keys, absl::Span<uint32_t> handles,
                   absl::Span<std::atomic<uint64_t>* const> hints) ABSL_LOCKS_EXCLUDED(mu_);
  static uint64_t PackHint(uint32_t handle, uint32_t generation) {
    return uint64_t{generation} << 32 | handle;  // generations start at 1: 0 is no hint
  }
  // The hash the index files a tuple under.
  static size_t HashOf(const SeriesIdentityKey& key);
  // Drops one reference; the last one frees the tuple (its handle may be reused).
  void Release(uint32_t handle) ABSL_LOCKS_EXCLUDED(mu_);
  // The tuple of a handle the caller holds. Lock-free.
  const SeriesIdentity& Get(uint32_t handle) const;

  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);     // tuples held
  size_t strings() const ABSL_LOCKS_EXCLUDED(mu_);  // distinct names held
  // Heap bytes: every chunk of tuples allocated, the directories, the tuple index and the free
  // list at their capacity, and the interned names with their table's overhead (an estimate of
  // the node allocations).
  size_t bytes() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  static constexpr uint32_t kChunkBits = 8;  // 256 tuples (14 KiB) a chunk
  static constexpr uint32_t kChunkSize = 1u << kChunkBits;
  struct Directory {  // chunk pointers; the chunks are owned by chunks_
    std::unique_ptr<SeriesIdentity*[]> chunks;
    size_t capacity = 0;
  };
  // The index hashes and compares tuples through the pool, so it stores only 4-byte handles.
  // A key with its hash computed (outside the lock).
  struct HashedKey {
    const SeriesIdentityKey* key;
    size_t hash;
  };
  struct Hash {
    using is_transparent = void;
    const SeriesIdentityPool* pool;
    size_t operator()(uint32_t h) const;
    size_t operator()(const HashedKey& k) const { return k.hash; }
  };
  struct Eq {
    using is_transparent = void;
    const SeriesIdentityPool* pool;
    bool operator()(uint32_t a, uint32_t b) const { return a == b; }
    bool operator()(uint32_t a, const HashedKey& b) const;
    bool operator()(const HashedKey& a, uint32_t b) const { return (*this)(b, a); }
  };

  SeriesIdentity& Slot(uint32_t handle) const;
  const std::string* Intern(absl::string_view s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Unintern(const std::string* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint32_t NewHandle() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The tuple's handle with one more reference, interned when new.
  uint32_t AcquireLocked(const HashedKey& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::atomic<const Directory*> directory_{nullptr};
  std::vector<std::unique_ptr<Directory>> directories_ ABSL_GUARDED_BY(mu_);  // the newest last
  std::vector<std::unique_ptr<SeriesIdentity[]>> chunks_ ABSL_GUARDED_BY(mu_);
  uint32_t next_ ABSL_GUARDED_BY(mu_) = 0;  // handles ever handed out
  std::vector<uint32_t> free_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<uint32_t, Hash, Eq> index_ ABSL_GUARDED_BY(mu_);
  absl::node_hash_map<std::string, uint32_t> names_ ABSL_GUARDED_BY(mu_);  // name → tuples
  size_t name_chars_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_SERIES_IDENTITY_H_
