// A detector's memo of the port records it has looked up, keyed by the caller's port token
// (CounterStep::port_token: one per node and port) and valid for one version of the port
// directory. The aggregator hands a node's series over in id order and agents number a port's
// series together, so most steps name the same port as one of the two steps before (a few
// compares: two, for a RoCE port whose RDMA and netdev series interleave); the others cost one
// integer-keyed lookup instead of building a string key and hashing it. The
// detector clears the memo whenever it erases records.
#ifndef RINGSIDE_ANALYSIS_LAST_PORT_H_
#define RINGSIDE_ANALYSIS_LAST_PORT_H_

#include <cstdint>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "analysis/fabric_inputs.h"

namespace ringside::analysis {

template <typename Record>
class LastPort {
 public:
  // The record of `hint` when it is still valid, else the one remembered for `token` (nonzero)
  // under the directory as it is now (then stored in `hint` too), or null.
  Record* Find(uint64_t token, const PortDirectory* directory, RecordHint* hint = nullptr) {
    if (Valid(hint, directory)) return static_cast<Record*>(hint->record);
    Record* r = FindByToken(token, directory);
    if (r != nullptr && hint != nullptr) Store(hint, r);
    return r;
  }
  // Remembers `record` for `token` (when nonzero) and in `hint` (when given).
  void Remember(uint64_t token, const PortDirectory* directory, Record* record,
                RecordHint* hint = nullptr) {
    if (VersionOf(directory) != version_) {
      Clear();
      version_ = VersionOf(directory);
    }
    if (hint != nullptr) Store(hint, record);
    if (token == 0) return;
    by_token_[token] = record;
    if (token == prev_token_) prev_token_ = 0;
    if (token != last_token_) {
      Push(token, record);
    } else {
      last_ = record;
    }
  }
  // Whether `hint` names a record stored since the last Clear, under the directory as it is now.
  // (A detector may hand out hints to parts of its records too, through Store.)
  // (A hint is stored only once the memo has caught up with the directory's version, and the
  // memo clears itself, moving to a new epoch, when it sees the version change.)
  bool Valid(const RecordHint* hint, const PortDirectory* directory) const {
    return hint != nullptr && hint->record != nullptr && hint->epoch == epoch_ &&
           VersionOf(directory) == version_;
  }
  // Stores `record` in `hint` (valid until the next Clear or directory change). Call it after a
  // Find or Remember of this step.
  void Store(RecordHint* hint, void* record) const {
    hint->record = record;
    hint->epoch = epoch_;
  }
  // Forgets every record (the detector erased one): hints handed out so far are void.
  void Clear() {
    ++epoch_;
    last_token_ = prev_token_ = 0;
    last_ = prev_ = nullptr;
    by_token_.clear();
  }

 private:
  static uint64_t VersionOf(const PortDirectory* d) { return d == nullptr ? 0 : d->version(); }
  Record* FindByToken(uint64_t token, const PortDirectory* directory) {
    if (token == 0) return nullptr;
    if (VersionOf(directory) != version_) {
      Clear();
      version_ = VersionOf(directory);
      return nullptr;
    }
    if (token == last_token_) return last_;
    if (token == prev_token_) {  // a port's series of two sources interleave (ib and netdev)
      std::swap(last_token_, prev_token_);
      std::swap(last_, prev_);
      return last_;
    }
    auto it = by_token_.find(token);
    if (it == by_token_.end()) return nullptr;
    Push(token, it->second);
    return last_;
  }
  void Push(uint64_t token, Record* record) {
    prev_token_ = last_token_;
    prev_ = last_;
    last_token_ = token;
    last_ = record;
  }

  uint64_t version_ = 0;
  uint32_t epoch_ = 1;       // hints stored before the last Clear are void (0: never valid)
  uint64_t last_token_ = 0;  // the last two tokens seen, the latest first
  Record* last_ = nullptr;
  uint64_t prev_token_ = 0;
  Record* prev_ = nullptr;
  absl::flat_hash_map<uint64_t, Record*> by_token_;
};

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_LAST_PORT_H_
