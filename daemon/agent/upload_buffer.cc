#include "daemon/agent/upload_buffer.h"

#include <utility>

namespace ringside::daemon {

absl::string_view UploadTypeName(UploadType type) {
  switch (type) {
    case UploadType::kSamples:
      return "samples";
    case UploadType::kCollectives:
      return "collectives";
    case UploadType::kLinkEvents:
      return "link_events";
  }
  return "unknown";
}

size_t UploadBuffer::Footprint(const v1::AgentMessage& msg) {
  // The map node, the Entry and the shared_ptr control block.
  constexpr size_t kOverhead = 128;
  return msg.SpaceUsedLong() + kOverhead;
}

void UploadBuffer::Push(UploadType type, v1::AgentMessage msg, size_t records) {
  msg.set_seq(0);
  Entry e;
  e.order = next_order_++;
  e.type = type;
  e.records = records;
  e.bytes = Footprint(msg);
  e.msg = std::make_shared<v1::AgentMessage>(std::move(msg));
  bytes_ += e.bytes;
  LiveSet(type).insert(e.order);
  entries_.emplace(e.order, std::move(e));
  EnforceCapacity();
}

void UploadBuffer::EnforceCapacity() {
  while (bytes_ > capacity_) {
    if (!live_samples_.empty()) {
      Drop(*live_samples_.begin());
    } else if (!live_others_.empty()) {
      Drop(*live_others_.begin());
    } else {
      break;  // only tombstones left: they go with the next ack or session
    }
  }
}

void UploadBuffer::Erase(std::map<uint64_t, Entry>::iterator it) {
  if (!it->second.tombstone) LiveSet(it->second.type).erase(it->first);
  if (it->second.fate_pending) {
    // Only Ack erases a tombstone: acked before it was ever resent, so the aggregator holds the
    // message it replaced.
    DropCounts& c = drops_[static_cast<size_t>(it->second.type)];
    --c.pending.messages;
    c.pending.records -= it->second.dropped_records;
    ++c.delivered.messages;
    c.delivered.records += it->second.dropped_records;
  }
  bytes_ -= it->second.bytes;
  entries_.erase(it);
}

void UploadBuffer::Drop(uint64_t order) {
  auto it = entries_.find(order);
  if (it == entries_.end() || it->second.tombstone) return;
  Entry& e = it->second;
  DropCounts& c = drops_[static_cast<size_t>(e.type)];
  if (e.seq == 0) {
    ++c.dropped.messages;  // never sent: lost, and no seq, no gap
    c.dropped.records += e.records;
    Erase(it);
    return;
  }
  // Sent: it may still arrive (part of it may sit in socket buffers). Pending until known.
  ++c.pending.messages;
  c.pending.records += e.records;
  e.fate_pending = true;
  e.dropped_records = e.records;
  // Sent but not acked: keep the seq with an empty body of the same type.
  auto empty = std::make_shared<v1::AgentMessage>();
  empty->set_seq(e.seq);
  switch (e.type) {
    case UploadType::kSamples:
      empty->mutable_samples()->set_timestamp_unix_nanos(e.msg->samples().timestamp_unix_nanos());
      break;
    case UploadType::kCollectives:
      empty->mutable_collectives();
      break;
    case UploadType::kLinkEvents:
      empty->mutable_link_events();
      break;
  }
  LiveSet(e.type).erase(e.order);
  bytes_ -= e.bytes;
  e.bytes = Footprint(*empty);
  bytes_ += e.bytes;
  e.records = 0;
  e.tombstone = true;
  e.msg = std::move(empty);
}

const UploadBuffer::Entry* UploadBuffer::NextAfter(uint64_t order) const {
  auto it = entries_.upper_bound(order);
  return it == entries_.end() ? nullptr : &it->second;
}

uint64_t UploadBuffer::AssignSeq(uint64_t order) {
  auto it = entries_.find(order);
  if (it == entries_.end()) return 0;
  Entry& e = it->second;
  if (e.seq != 0) return e.seq;
  // Everything before it must already be assigned (sent in order).
  if (it != entries_.begin() && std::prev(it)->second.seq == 0) return 0;
  e.seq = next_seq_++;
  e.msg->set_seq(e.seq);
  return e.seq;
}

void UploadBuffer::Ack(uint64_t acked_seq) {
  while (!entries_.empty()) {
    auto it = entries_.begin();
    if (it->second.seq == 0 || it->second.seq > acked_seq) break;
    Erase(it);
  }
}

void UploadBuffer::MarkResent(uint64_t order) {
  auto it = entries_.find(order);
  if (it == entries_.end() || !it->second.fate_pending) return;
  Entry& e = it->second;
  DropCounts& c = drops_[static_cast<size_t>(e.type)];
  --c.pending.messages;
  c.pending.records -= e.dropped_records;
  ++c.dropped.messages;
  c.dropped.records += e.dropped_records;
  e.fate_pending = false;
}

uint64_t UploadBuffer::resend_from_seq() const {
  if (!entries_.empty() && entries_.begin()->second.seq != 0) return entries_.begin()->second.seq;
  return next_seq_;
}

}  // namespace ringside::daemon
