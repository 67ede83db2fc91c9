// The uploader's bounded buffer of sequenced messages (SampleBatch, CollectiveBatch, LinkEvents)
// that the aggregator has not acknowledged yet. No I/O and no locking: the Uploader owns one under
// its mutex.
//
// Sequence numbers are assigned when a message is first written to a stream (AssignSeq), not when
// it enters the buffer, so the buffer always looks like
//
//   [ assigned: seq a, a+1, ..., b (sent, not acked) ][ unassigned: never sent ]
//
// and a message dropped before it was ever sent leaves no gap in the sequence. A dropped message
// that was already sent keeps its seq as a *tombstone* (the same message type with an empty body),
// so a later session resends the seq and the aggregator's contiguous ack never stalls on a hole.
// Tombstones stay until acked, across sessions: the next session's HelloAck says whether the
// aggregator got the message they replace.
//
// When the buffer holds more than its capacity, it drops (in this order): the oldest SampleBatch
// (counters are cumulative: a lost batch costs resolution, not totals); only when no SampleBatch
// remains, the oldest CollectiveBatch or LinkEvents. Every drop is counted by type, exactly:
// - a message never sent is counted as dropped at once;
// - a message already written to a stream may still arrive (what TCP had taken of it is
//   delivered when a stalled link returns), so its fate is *pending* until it is known: its
//   tombstone acked without having been resent means the aggregator has the message (counted as
//   `delivered`, not dropped); its tombstone resent in a later session (after that session's
//   HelloAck, which acks everything the aggregator holds) means it is lost (counted as dropped).
#ifndef RINGSIDE_DAEMON_AGENT_UPLOAD_BUFFER_H_
#define RINGSIDE_DAEMON_AGENT_UPLOAD_BUFFER_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>

#include "absl/strings/string_view.h"
#include "ringside/v1/ingest.pb.h"

namespace ringside::daemon {

// The sequenced message types (the `type` label of the upload metrics).
enum class UploadType : uint8_t { kSamples = 0, kCollectives = 1, kLinkEvents = 2 };
inline constexpr size_t kUploadTypes = 3;
absl::string_view UploadTypeName(UploadType type);  // samples, collectives, link_events

class UploadBuffer {
 public:
  struct Entry {
    uint64_t order = 0;  // position in arrival order (1, 2, ...), never reused
    uint64_t seq = 0;    // 0 until first sent
    UploadType type = UploadType::kSamples;
    size_t bytes = 0;    // what the entry counts against the capacity
    size_t records = 0;  // sample values, collective records or link events it carries
    bool tombstone = false;
    // A tombstone whose message's fate is not known yet, and what that message carried.
    bool fate_pending = false;
    size_t dropped_records = 0;
    // Shared so that a write in flight keeps its message when the entry is dropped.
    std::shared_ptr<v1::AgentMessage> msg;
  };
  struct Drops {
    uint64_t messages = 0;
    uint64_t records = 0;
  };
  // Per type: dropped (lost for sure), pending (dropped after being sent, fate not known yet),
  // delivered (dropped after being sent, then acked: the aggregator has it).
  struct DropCounts {
    Drops dropped;
    Drops pending;
    Drops delivered;
  };

  explicit UploadBuffer(size_t capacity_bytes) : capacity_(capacity_bytes) {}

  // Adds a message (its seq field is ignored and set at AssignSeq), then drops per the policy
  // above until the buffer fits its capacity again (which may drop `msg` itself).
  void Push(UploadType type, v1::AgentMessage msg, size_t records);

  // The first entry after `order` in arrival order, or nullptr. The pointer is valid until the
  // next non-const call.
  const Entry* NextAfter(uint64_t order) const;

  // Gives the entry at `order` the next sequence number if it has none, and returns its seq (0 if
  // there is no such entry). Only the first unassigned entry can be assigned: messages are sent
  // in order.
  uint64_t AssignSeq(uint64_t order);

  // The aggregator holds everything up to `acked_seq`: drop those entries.
  void Ack(uint64_t acked_seq);

  // The entry at `order` is about to be written to a stream that is not the one that carried it
  // first (a resend). If it is a tombstone whose fate was pending, the message it replaced is now
  // known to be lost (the session's HelloAck acked everything the aggregator holds): counted as
  // dropped.
  void MarkResent(uint64_t order);

  // Hello.resend_from_seq: the lowest seq still held, or the next seq to be assigned when no
  // assigned message is held. Everything below it was acked or dropped.
  uint64_t resend_from_seq() const;
  uint64_t last_assigned_seq() const { return next_seq_ - 1; }

  size_t bytes() const { return bytes_; }
  size_t messages() const { return entries_.size(); }
  size_t capacity() const { return capacity_; }
  bool empty() const { return entries_.empty(); }
  const Drops& dropped(UploadType type) const { return counts(type).dropped; }
  const DropCounts& counts(UploadType type) const { return drops_[static_cast<size_t>(type)]; }

  // What an entry of this message counts against the capacity: its in-memory size plus the
  // buffer's own bookkeeping.
  static size_t Footprint(const v1::AgentMessage& msg);

 private:
  std::set<uint64_t>& LiveSet(UploadType type) {
    return type == UploadType::kSamples ? live_samples_ : live_others_;
  }
  void Erase(std::map<uint64_t, Entry>::iterator it);
  void Drop(uint64_t order);
  void EnforceCapacity();

  const size_t capacity_;
  std::map<uint64_t, Entry> entries_;  // by order
  // Orders of entries that still carry data (not tombstones), by kind of drop priority.
  std::set<uint64_t> live_samples_;
  std::set<uint64_t> live_others_;
  size_t bytes_ = 0;
  uint64_t next_order_ = 1;
  uint64_t next_seq_ = 1;
  std::array<DropCounts, kUploadTypes> drops_{};
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGENT_UPLOAD_BUFFER_H_
