#include "analysis/series_identity.h"

#include <utility>
#include <vector>

#include "absl/hash/hash.h"

namespace ringside::analysis {

size_t SeriesIdentityPool::HashOf(const SeriesIdentityKey& k) {
  return absl::HashOf(k.source, k.device, k.port, k.counter, k.unit, k.priority);
}

size_t SeriesIdentityPool::Hash::operator()(uint32_t h) const { return pool->Slot(h).hash; }

bool SeriesIdentityPool::Eq::operator()(uint32_t a, const HashedKey& hb) const {
  const SeriesIdentity& t = pool->Slot(a);
  const SeriesIdentityKey& b = *hb.key;
  return t.hash == hb.hash && t.priority == b.priority && *t.counter == b.counter &&
         *t.device == b.device && *t.port == b.port && *t.source == b.source && *t.unit == b.unit;
}

SeriesIdentityPool::SeriesIdentityPool() : index_(0, Hash{this}, Eq{this}) {}

SeriesIdentityPool::~SeriesIdentityPool() = default;

SeriesIdentity& SeriesIdentityPool::Slot(uint32_t handle) const {
  const Directory* d = directory_.load(std::memory_order_acquire);
  return d->chunks[handle >> kChunkBits][handle & (kChunkSize - 1)];
}

const SeriesIdentity& SeriesIdentityPool::Get(uint32_t handle) const { return Slot(handle); }

const std::string* SeriesIdentityPool::Intern(absl::string_view s) {
  auto [it, inserted] = names_.try_emplace(std::string(s), 0);
  if (inserted) name_chars_ += s.size();
  ++it->second;
  return &it->first;
}

void SeriesIdentityPool::Unintern(const std::string* s) {
  auto it = names_.find(*s);
  if (it == names_.end()) return;
  if (--it->second == 0) {
    name_chars_ -= it->first.size();
    names_.erase(it);
  }
}

uint32_t SeriesIdentityPool::NewHandle() {
  if (!free_.empty()) {
    const uint32_t h = free_.back();
    free_.pop_back();
    return h;
  }
  const uint32_t h = next_++;
  const size_t chunk = h >> kChunkBits;
  if ((h & (kChunkSize - 1)) == 0) {
    // A new chunk; first a larger directory when this one is full. Readers may hold the old
    // directory: it stays allocated, and every chunk it lists stays where it is.
    const Directory* cur = directories_.empty() ? nullptr : directories_.back().get();
    if (cur == nullptr || chunk >= cur->capacity) {
      auto d = std::make_unique<Directory>();
      d->capacity = cur == nullptr ? 4 : 2 * cur->capacity;
      d->chunks = std::make_unique<SeriesIdentity*[]>(d->capacity);
      for (size_t i = 0; cur != nullptr && i < cur->capacity; ++i) d->chunks[i] = cur->chunks[i];
      directories_.push_back(std::move(d));
    }
    chunks_.push_back(std::make_unique<SeriesIdentity[]>(kChunkSize));
    directories_.back()->chunks[chunk] = chunks_.back().get();
    directory_.store(directories_.back().get(), std::memory_order_release);
  }
  return h;
}

uint32_t SeriesIdentityPool::AcquireLocked(const HashedKey& key) {
  auto it = index_.find(key);
  if (it != index_.end()) {
    Slot(*it).refs.fetch_add(1, std::memory_order_relaxed);
    return *it;
  }
  const uint32_t h = NewHandle();
  SeriesIdentity& t = Slot(h);
  t.source = Intern(key.key->source);
  t.device = Intern(key.key->device);
  t.port = Intern(key.key->port);
  t.counter = Intern(key.key->counter);
  t.unit = Intern(key.key->unit);
  t.priority = key.key->priority;
  t.hash = key.hash;
  t.refs.store(1, std::memory_order_relaxed);
  ++t.generation;
  index_.insert(h);
  return h;
}

uint32_t SeriesIdentityPool::Acquire(const SeriesIdentityKey& key) {
  const HashedKey hashed{&key, HashOf(key)};
  absl::MutexLock lock(&mu_);
  return AcquireLocked(hashed);
}

void SeriesIdentityPool::AcquireMany(absl::Span<const SeriesIdentityKey> keys,
                                     absl::Span<uint32_t> handles) {
  AcquireMany(keys, handles, {});
}

void SeriesIdentityPool::AcquireMany(absl::Span<const SeriesIdentityKey> keys,
                                     absl::Span<uint32_t> handles,
                                     absl::Span<std::atomic<uint64_t>* const> hints) {
  constexpr uint32_t kMissing = ~0u;
  auto hint_of = [&hints](size_t i) -> std::atomic<uint64_t>* {
    return hints.empty() ? nullptr : hints[i];
  };
  // Hashing five names is most of a lookup: done before any lock, for the keys with no hint.
  thread_local std::vector<size_t> hashes;
  hashes.resize(keys.size());
  thread_local std::vector<uint64_t> seen;  // each key's hint as read
  seen.assign(keys.size(), 0);
  for (size_t i = 0; i < keys.size(); ++i) {
    if (std::atomic<uint64_t>* h = hint_of(i)) seen[i] = h->load(std::memory_order_relaxed);
    if (seen[i] == 0) hashes[i] = HashOf(keys[i]);
  }
  size_t missing = 0;
  {
    // A tuple found in the index holds a reference, and only Release under the exclusive lock
    // drops the last one: under the shared lock it stays, and its count may be raised. The same
    // holds for a hinted handle whose tuple is held (refs > 0) under the hint's generation: a
    // handle is reused, with a new generation, only after its last reference went.
    absl::ReaderMutexLock lock(&mu_);
    const auto& index = index_;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (seen[i] != 0) {
        const uint32_t handle = static_cast<uint32_t>(seen[i]);
        if (handle < next_) {
          SeriesIdentity& t = Slot(handle);
          if (t.generation == static_cast<uint32_t>(seen[i] >> 32) &&
              t.refs.load(std::memory_order_relaxed) > 0) {
            t.refs.fetch_add(1, std::memory_order_relaxed);
            handles[i] = handle;
            continue;
          }
        }
        seen[i] = 0;  // stale: looked up as any other key
        hashes[i] = HashOf(keys[i]);
      }
      auto it = index.find(HashedKey{&keys[i], hashes[i]});
      if (it == index.end()) {
        handles[i] = kMissing;
        ++missing;
        continue;
      }
      Slot(*it).refs.fetch_add(1, std::memory_order_relaxed);
      handles[i] = *it;
      if (std::atomic<uint64_t>* h = hint_of(i)) {
        h->store(PackHint(*it, Slot(*it).generation), std::memory_order_relaxed);
      }
    }
  }
  if (missing == 0) return;
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < keys.size(); ++i) {
    if (handles[i] != kMissing) continue;
    handles[i] = AcquireLocked(HashedKey{&keys[i], hashes[i]});
    if (std::atomic<uint64_t>* h = hint_of(i)) {
      h->store(PackHint(handles[i], Slot(handles[i]).generation), std::memory_order_relaxed);
    }
  }
}

void SeriesIdentityPool::Release(uint32_t handle) {
  absl::MutexLock lock(&mu_);
  if (handle >= next_) return;
  SeriesIdentity& t = Slot(handle);
  const uint32_t refs = t.refs.load(std::memory_order_relaxed);
  if (refs == 0) return;
  t.refs.store(refs - 1, std::memory_order_relaxed);  // no shared holder now: mu_ is exclusive
  if (refs != 1) return;
  index_.erase(handle);
  for (const std::string* s : {t.source, t.device, t.port, t.counter, t.unit}) Unintern(s);
  t.source = t.device = t.port = t.counter = t.unit = nullptr;
  t.priority = -1;
  t.hash = 0;  // the generation stays: the next tuple under this handle counts on from it
  free_.push_back(handle);
}

size_t SeriesIdentityPool::size() const {
  absl::MutexLock lock(&mu_);
  return index_.size();
}

size_t SeriesIdentityPool::strings() const {
  absl::MutexLock lock(&mu_);
  return names_.size();
}

size_t SeriesIdentityPool::bytes() const {
  absl::MutexLock lock(&mu_);
  size_t b = chunks_.size() * kChunkSize * sizeof(SeriesIdentity) +
             chunks_.capacity() * sizeof(chunks_[0]) + free_.capacity() * sizeof(uint32_t) +
             directories_.capacity() * sizeof(directories_[0]);
  for (const auto& d : directories_) b += sizeof(Directory) + d->capacity * sizeof(void*);
  // The index: a 4-byte slot and a control byte each (absl's flat_hash_set).
  b += index_.capacity() * (sizeof(uint32_t) + 1);
  // Each name: its characters, the node (key, count, allocator overhead) and a slot pointer.
  b += name_chars_ + names_.size() * (sizeof(std::string) + sizeof(uint32_t) + 16 + sizeof(void*));
  return b;
}

}  // namespace ringside::analysis
