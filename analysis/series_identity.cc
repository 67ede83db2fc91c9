#include "analysis/series_identity.h"

#include <utility>

#include "absl/hash/hash.h"

namespace ringside::analysis {

size_t SeriesIdentityPool::Hash::operator()(const SeriesIdentityKey& k) const {
  return absl::HashOf(k.source, k.device, k.port, k.counter, k.unit, k.priority);
}

size_t SeriesIdentityPool::Hash::operator()(uint32_t h) const {
  const SeriesIdentity& t = pool->Slot(h);
  return (*this)(SeriesIdentityKey{*t.source, *t.device, *t.port, *t.counter, *t.unit, t.priority});
}

bool SeriesIdentityPool::Eq::operator()(uint32_t a, const SeriesIdentityKey& b) const {
  const SeriesIdentity& t = pool->Slot(a);
  return t.priority == b.priority && *t.counter == b.counter && *t.device == b.device &&
         *t.port == b.port && *t.source == b.source && *t.unit == b.unit;
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

uint32_t SeriesIdentityPool::Acquire(const SeriesIdentityKey& key) {
  absl::MutexLock lock(&mu_);
  auto it = index_.find(key);
  if (it != index_.end()) {
    ++Slot(*it).refs;
    return *it;
  }
  const uint32_t h = NewHandle();
  SeriesIdentity& t = Slot(h);
  t.source = Intern(key.source);
  t.device = Intern(key.device);
  t.port = Intern(key.port);
  t.counter = Intern(key.counter);
  t.unit = Intern(key.unit);
  t.priority = key.priority;
  t.refs = 1;
  ++t.generation;
  index_.insert(h);
  return h;
}

void SeriesIdentityPool::Release(uint32_t handle) {
  absl::MutexLock lock(&mu_);
  if (handle >= next_) return;
  SeriesIdentity& t = Slot(handle);
  if (t.refs == 0 || --t.refs != 0) return;
  index_.erase(handle);  // hashes the tuple: before its names go
  for (const std::string* s : {t.source, t.device, t.port, t.counter, t.unit}) Unintern(s);
  const uint32_t generation = t.generation;
  t = SeriesIdentity();
  t.generation = generation;
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
