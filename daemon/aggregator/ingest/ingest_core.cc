#include "daemon/aggregator/ingest/ingest_core.h"

#include <algorithm>
#include <deque>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/protocol.h"

namespace ringside::daemon {

struct IngestCore::NodeEntry : public std::enable_shared_from_this<NodeEntry> {
  struct Epoch {
    uint64_t epoch = 0;
    uint64_t applied = 0;          // highest seq taken in
    std::deque<uint64_t> pending;  // seqs of journal records not yet durable, ascending
    absl::Time last_used;
    uint64_t ackable() const { return pending.empty() ? applied : pending.front() - 1; }
  };

  NodeEntry(std::string n, analysis::NodeSeries* s) : name(std::move(n)), series(s) {}

  const std::string name;
  mutable absl::Mutex mu;
  analysis::NodeSeries* const series ABSL_PT_GUARDED_BY(mu);
  std::vector<Epoch> epochs ABSL_GUARDED_BY(mu);
  std::deque<ReceivedCollective> collectives ABSL_GUARDED_BY(mu);
  std::deque<ReceivedLinkEvent> links ABSL_GUARDED_BY(mu);
  absl::Time last_seen ABSL_GUARDED_BY(mu) = absl::InfinitePast();
  absl::Time last_seen_steady ABSL_GUARDED_BY(mu) = absl::InfinitePast();  // steady_now()
  uint64_t owner_id ABSL_GUARDED_BY(mu) = 0;
  std::weak_ptr<SessionLink> owner ABSL_GUARDED_BY(mu);
  uint64_t current_epoch ABSL_GUARDED_BY(mu) = 0;
  std::string agent_version ABSL_GUARDED_BY(mu);  // from the latest Hello
  // Some Hello (every one from an agent older than shard routing) offered samples: this node's
  // counters come here. Until then, a node whose Hellos offer only collectives is not judged stale.
  bool counters_here ABSL_GUARDED_BY(mu) = false;
  bool hello_seen ABSL_GUARDED_BY(mu) = false;
  bool stale_reported ABSL_GUARDED_BY(mu) = false;  // by StaleChanges
  absl::Time last_undefined_log ABSL_GUARDED_BY(mu) = absl::InfinitePast();

  Epoch* FindEpoch(uint64_t epoch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    for (Epoch& e : epochs) {
      if (e.epoch == epoch) return &e;
    }
    return nullptr;
  }
  // The epoch's state, created when new; past `max` epochs the least recently used other than
  // the current one is forgotten.
  Epoch& GetEpoch(uint64_t epoch, absl::Time now, size_t max) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (Epoch* e = FindEpoch(epoch)) {
      e->last_used = std::max(e->last_used, now);
      return *e;
    }
    while (!epochs.empty() && epochs.size() >= std::max<size_t>(1, max)) {
      auto victim = epochs.end();
      for (auto it = epochs.begin(); it != epochs.end(); ++it) {
        if (it->epoch == current_epoch && epochs.size() > 1) continue;
        if (victim == epochs.end() || it->last_used < victim->last_used) victim = it;
      }
      epochs.erase(victim);
    }
    Epoch e;
    e.epoch = epoch;
    e.last_used = now;
    epochs.push_back(std::move(e));
    return epochs.back();
  }
};

namespace {

constexpr size_t kStepIndexMax = kStepKinds - 1;

MessageType TypeOf(const v1::AgentMessage& m) {
  switch (m.body_case()) {
    case v1::AgentMessage::kHello:
      return MessageType::kHello;
    case v1::AgentMessage::kSeriesDefs:
      return MessageType::kSeriesDefs;
    case v1::AgentMessage::kSamples:
      return MessageType::kSamples;
    case v1::AgentMessage::kCollectives:
      return MessageType::kCollectives;
    case v1::AgentMessage::kLinkEvents:
      return MessageType::kLinkEvents;
    default:
      return MessageType::kOther;
  }
}

template <typename T>
void PushBounded(std::deque<T>& window, T item, size_t cap) {
  if (cap == 0) return;
  window.push_back(std::move(item));
  while (window.size() > cap) window.pop_front();
}

}  // namespace

bool ValidNodeName(absl::string_view name, size_t max_bytes) {
  if (name.empty() || name.size() > max_bytes) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '-' && c != ':' && c != '@') {
      return false;
    }
  }
  return true;
}

IngestCore::IngestCore(IngestOptions options, IngestStats* stats)
    : options_(std::move(options)),
      stats_(stats),
      store_(analysis::SeriesStore::Options{
          options_.limits.max_nodes, analysis::SeriesLimits{options_.limits.max_series_per_node,
                                                            options_.limits.max_name_bytes}}),
      started_(options_.now()),
      started_steady_(options_.steady_now()) {}

IngestCore::~IngestCore() = default;

std::shared_ptr<IngestCore::NodeEntry> IngestCore::FindNode(const std::string& node) const {
  absl::MutexLock l(&mu_);
  auto it = nodes_.find(node);
  return it == nodes_.end() ? nullptr : it->second;
}

absl::StatusOr<std::shared_ptr<IngestCore::NodeEntry>> IngestCore::GetOrAddNode(
    const std::string& node) {
  absl::MutexLock l(&mu_);
  auto it = nodes_.find(node);
  if (it != nodes_.end()) return it->second;
  absl::StatusOr<analysis::NodeSeries*> series = store_.AddNode(node);
  if (!series.ok()) return series.status();
  auto entry = std::make_shared<NodeEntry>(node, *series);
  nodes_.emplace(node, entry);
  return entry;
}

std::vector<std::shared_ptr<IngestCore::NodeEntry>> IngestCore::AllNodes() const {
  absl::MutexLock l(&mu_);
  std::vector<std::shared_ptr<NodeEntry>> out;
  out.reserve(nodes_.size());
  for (const auto& [name, entry] : nodes_) out.push_back(entry);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a->name < b->name; });
  return out;
}

void IngestCore::RestoreEntry(const JournalEntry& e) {
  absl::StatusOr<std::shared_ptr<NodeEntry>> node = GetOrAddNode(e.node);
  if (!node.ok()) {
    if (options_.log)
      options_.log(absl::StrCat("journal replay: node ", e.node, ": ", node.status().message()));
    return;
  }
  NodeEntry& n = **node;
  absl::MutexLock l(&n.mu);
  NodeEntry::Epoch& ep = n.GetEpoch(e.agent_epoch, e.received, options_.limits.max_epochs_per_node);
  ep.applied = std::max(ep.applied, e.seq);
  n.last_seen = std::max(n.last_seen, e.received);
  // Its age at start, carried over to the monotonic clock (never after the start).
  const absl::Duration age = std::max(absl::ZeroDuration(), started_ - e.received);
  n.last_seen_steady = std::max(n.last_seen_steady, started_steady_ - age);
  if (e.message.has_collectives()) {
    for (const v1::CollectiveRecord& r : e.message.collectives().records()) {
      PushBounded(n.collectives, ReceivedCollective{e.received, e.agent_epoch, e.seq, r},
                  options_.windows.collective_records_per_node);
    }
  } else if (e.message.has_link_events()) {
    for (const v1::LinkEvent& ev : e.message.link_events().events()) {
      PushBounded(n.links, ReceivedLinkEvent{e.received, e.agent_epoch, e.seq, ev},
                  options_.windows.link_events_per_node);
    }
  }
}

void IngestCore::RestoreWatermarks(const std::vector<Watermark>& marks) {
  for (const Watermark& w : marks) {
    absl::StatusOr<std::shared_ptr<NodeEntry>> node = GetOrAddNode(w.node);
    if (!node.ok()) continue;
    NodeEntry& n = **node;
    absl::MutexLock l(&n.mu);
    NodeEntry::Epoch& ep =
        n.GetEpoch(w.agent_epoch, absl::InfinitePast(), options_.limits.max_epochs_per_node);
    ep.applied = std::max(ep.applied, w.seq);
  }
}

absl::StatusOr<IngestCore::SessionStart> IngestCore::Hello(const v1::Hello& hello,
                                                           uint64_t session_id,
                                                           std::weak_ptr<SessionLink> session) {
  IngestStats::Add(stats_->messages, MessageType::kHello);
  if (!ValidNodeName(hello.node(), options_.limits.max_name_bytes)) {
    IngestStats::Add(stats_->refusals, RefusalReason::kBadHello);
    return absl::InvalidArgumentError(absl::StrCat(
        "Hello.node \"", absl::CEscape(hello.node().substr(0, 64)), "\" is not a node name (1 to ",
        options_.limits.max_name_bytes, " of A-Z a-z 0-9 . _ - : @)"));
  }
  const uint32_t agent_max = hello.protocol_version();
  const uint32_t agent_min =
      hello.min_protocol_version() == 0 ? agent_max : hello.min_protocol_version();
  const uint32_t our_min = options_.min_protocol_version;
  const uint32_t our_max = options_.max_protocol_version;
  if (agent_max < our_min || agent_min > our_max || agent_min > agent_max) {
    IngestStats::Add(stats_->refusals, RefusalReason::kVersion);
    return absl::FailedPreconditionError(absl::StrCat(
        "protocol version mismatch: agent ", hello.node(), " speaks ringside.v1 versions ",
        agent_min, "..", agent_max, ", this aggregator ", our_min, "..", our_max,
        agent_max < our_min ? " (upgrade the agent)" : " (upgrade the aggregator)"));
  }
  absl::StatusOr<std::shared_ptr<NodeEntry>> node = GetOrAddNode(hello.node());
  if (!node.ok()) {
    IngestStats::Add(stats_->limit_rejections, LimitReason::kMaxNodes);
    IngestStats::Add(stats_->refusals, RefusalReason::kLimit);
    return absl::ResourceExhaustedError(absl::StrCat(
        "node ", hello.node(), " refused: ", node.status().message(), " (--max-nodes)"));
  }
  SessionStart start;
  start.node = *node;
  start.protocol_version = std::min(agent_max, our_max);
  const absl::Time now = options_.now();
  const absl::Time steady = options_.steady_now();
  NodeEntry& n = **node;
  absl::MutexLock l(&n.mu);
  if (n.owner_id != 0) start.replaced = n.owner.lock();
  n.owner_id = session_id;
  n.owner = std::move(session);
  n.current_epoch = hello.agent_epoch();
  n.agent_version = hello.agent_version().substr(0, 128);
  n.last_seen = now;
  n.last_seen_steady = steady;
  n.hello_seen = true;
  // The latest Hello says whether this node's counters come here: an agent that moved to another
  // shard (docs/scale.md) says Hello again offering only collectives, and the node is then
  // collectives-only here, never judged stale for the silence of its counters.
  const auto& caps = hello.capabilities();
  n.counters_here = caps.empty() || std::find(caps.begin(), caps.end(), "samples") != caps.end();
  if (options_.warn_replicas_without_peers && options_.log && !warned_replicas_.load()) {
    for (const std::string& c : caps) {
      int replicas = 0;
      if (!absl::StartsWith(c, "replicas=") ||
          !absl::SimpleAtoi(absl::string_view(c).substr(9), &replicas) || replicas < 2 ||
          warned_replicas_.exchange(true)) {
        continue;
      }
      options_.log(absl::StrCat(
          "WARNING: node ", n.name, " streams its counters to ", replicas,
          " aggregators (replicas of one shard), but this one was started without --peers: if it "
          "is restarted with an empty --state-dir it raises the shard's open incidents again "
          "under new keys and Alertmanager pages them a second time. Start every replica with "
          "--peers=<the other replicas' gRPC host:port> (docs/deploy.md)."));
    }
  }
  if (!n.counters_here && observer_ != nullptr) observer_->OnCountersElsewhere(n.name);
  NodeEntry::Epoch& ep = n.GetEpoch(hello.agent_epoch(), now, options_.limits.max_epochs_per_node);
  // The agent holds nothing below resend_from_seq: close the gap below it.
  if (hello.resend_from_seq() > 0 && hello.resend_from_seq() - 1 > ep.applied) {
    IngestStats::Add(stats_->gap_messages, hello.resend_from_seq() - 1 - ep.applied);
    ep.applied = hello.resend_from_seq() - 1;
  }
  start.acked_seq = ep.ackable();
  IngestStats::Add(stats_->sessions_started);
  return start;
}

absl::Status IngestCore::ApplySeriesDefs(NodeEntry& n, uint64_t session_id,
                                         const SeriesDefsView& defs) {
  IngestStats::Add(stats_->messages, MessageType::kSeriesDefs);
  const absl::Time now = options_.now();
  const absl::Time steady = options_.steady_now();
  absl::MutexLock l(&n.mu);
  if (absl::Status s = TakeMessageLocked(n, session_id, now, steady); !s.ok()) return s;
  return DefineLocked(n, defs);
}

absl::Status IngestCore::TakeMessageLocked(NodeEntry& n, uint64_t session_id, absl::Time now,
                                           absl::Time steady) {
  n.mu.AssertHeld();
  if (n.owner_id != session_id) {
    return absl::AbortedError(absl::StrCat("replaced by a newer session of node ", n.name));
  }
  n.last_seen = now;
  n.last_seen_steady = steady;
  return absl::OkStatus();
}

absl::Status IngestCore::DefineLocked(NodeEntry& n, const SeriesDefsView& defs) {
  n.mu.AssertHeld();
  if (defs.defs_received > options_.limits.max_defs_per_message ||
      defs.info_received > options_.limits.max_defs_per_message) {
    IngestStats::Add(stats_->limit_rejections, LimitReason::kMaxDefsPerMessage);
    return absl::ResourceExhaustedError(
        absl::StrCat("SeriesDefs of ", defs.defs_received, " definitions and ", defs.info_received,
                     " info records exceeds ", options_.limits.max_defs_per_message,
                     " (--max-defs-per-message)"));
  }
  // The definitions before a malformed one are taken in, as one after another would be.
  if (absl::Status s = DefineAllLocked(n, defs.defs); !s.ok()) return s;
  if (!defs.malformed.ok()) return defs.malformed;
  n.series->Compact();
  if (defs.info != nullptr && observer_ != nullptr) observer_->OnInfo(n.name, *defs.info);
  return absl::OkStatus();
}

absl::Status IngestCore::DefineAllLocked(NodeEntry& n,
                                         absl::Span<const analysis::SeriesDefinitionRef> defs,
                                         absl::Span<std::atomic<uint64_t>> identity_hints) {
  n.mu.AssertHeld();
  analysis::DefineCounts counts;
  absl::Status s = n.series->DefineAll(defs, &counts, identity_hints);
  if (counts.added != 0) IngestStats::Add(stats_->series_defined, counts.added);
  if (counts.redefined != 0) IngestStats::Add(stats_->series_redefined, counts.redefined);
  if (!s.ok() && absl::IsResourceExhausted(s)) {
    IngestStats::Add(stats_->limit_rejections, LimitReason::kMaxSeriesPerNode);
    return absl::ResourceExhaustedError(
        absl::StrCat("node ", n.name, ": ", s.message(), " (--max-series-per-node)"));
  }
  return s;
}

absl::Status IngestCore::DefineFromSet(NodeEntry& n, uint64_t session_id,
                                       absl::Span<const analysis::SeriesDefinitionRef> defs,
                                       absl::Span<std::atomic<uint64_t>> identity_hints) {
  const absl::Time now = options_.now();
  const absl::Time steady = options_.steady_now();
  absl::MutexLock l(&n.mu);
  if (absl::Status s = TakeMessageLocked(n, session_id, now, steady); !s.ok()) return s;
  if (absl::Status s = DefineAllLocked(n, defs, identity_hints); !s.ok()) return s;
  n.series->Compact();
  return absl::OkStatus();
}

absl::Status IngestCore::SamplesLocked(NodeEntry& n, uint64_t seq, absl::Time now,
                                       int64_t timestamp_unix_nanos,
                                       absl::Span<const uint32_t> ids,
                                       absl::Span<const uint64_t> values) {
  n.mu.AssertHeld();
  if (ids.size() != values.size()) {
    return absl::InvalidArgumentError(absl::StrCat("SampleBatch seq ", seq, ": ", ids.size(),
                                                   " ids but ", values.size(), " values"));
  }
  const int64_t t = timestamp_unix_nanos != 0 ? timestamp_unix_nanos : absl::ToUnixNanos(now);
  uint64_t accepted = 0;
  uint64_t undefined = 0;
  uint64_t out_of_order = 0;
  uint32_t first_undefined = 0;
  std::array<uint64_t, kStepKinds> steps{};
  analysis::StepResult r;
  // Each accepted sample's detail is written in place, at the end of `observed` (144 bytes a
  // sample, not copied again); a refused one's slot is taken by the next.
  thread_local std::vector<analysis::ObservedSample> observed;
  const bool observe = observer_ != nullptr;
  if (observe && observed.size() < ids.size()) observed.resize(ids.size());
  size_t kept = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    analysis::ObservedSample* detail = observe ? &observed[kept] : nullptr;
    if (!n.series->TryObserve(ids[i], values[i], t, &r, detail)) {
      if (undefined++ == 0) first_undefined = ids[i];
      continue;
    }
    if (!r.accepted) {
      ++out_of_order;
      continue;
    }
    ++accepted;
    ++steps[std::min(static_cast<size_t>(r.kind), kStepIndexMax)];
    if (observe) ++kept;
  }
  if (observe && kept != 0) observer_->OnSamples(n.name, absl::MakeConstSpan(observed.data(), kept));
  IngestStats::Add(stats_->samples, accepted);
  for (size_t k = 0; k < kStepKinds; ++k) {
    if (steps[k] != 0) IngestStats::Add(stats_->steps[k], steps[k]);
  }
  if (out_of_order != 0) {
    IngestStats::Add(stats_->samples_rejected, SampleRejection::kOutOfOrder, out_of_order);
  }
  if (undefined != 0) {
    IngestStats::Add(stats_->samples_rejected, SampleRejection::kUndefinedId, undefined);
    if (now - n.last_undefined_log >= absl::Minutes(1) && options_.log) {
      n.last_undefined_log = now;
      options_.log(absl::StrCat("node ", n.name, ": ", undefined,
                                " samples of undefined series ids skipped (first: id ",
                                first_undefined, ", batch seq ", seq, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status IngestCore::ApplySamples(NodeEntry& n, uint64_t agent_epoch, uint64_t session_id,
                                      const SampleBatchView& b) {
  // Apply's steps for a message whose body is a SampleBatch, in the same order.
  IngestStats::Add(stats_->messages, MessageType::kSamples);
  const absl::Time now = options_.now();
  const absl::Time steady = options_.steady_now();
  absl::MutexLock l(&n.mu);
  if (absl::Status s = TakeMessageLocked(n, session_id, now, steady); !s.ok()) return s;
  if (b.seq == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(MessageTypeName(MessageType::kSamples),
                     " with seq 0: only Hello and SeriesDefs are unsequenced"));
  }
  NodeEntry::Epoch& ep = n.GetEpoch(agent_epoch, now, options_.limits.max_epochs_per_node);
  if (b.seq <= ep.applied) {
    IngestStats::Add(stats_->duplicates);
    return absl::OkStatus();
  }
  absl::Status st = SamplesLocked(n, b.seq, now, b.timestamp_unix_nanos, b.ids, b.values);
  if (!st.ok()) return st;
  if (b.seq > ep.applied + 1) IngestStats::Add(stats_->gap_messages, b.seq - ep.applied - 1);
  ep.applied = b.seq;
  return absl::OkStatus();
}

absl::Status IngestCore::Apply(NodeEntry& n, uint64_t agent_epoch, uint64_t session_id,
                               const v1::AgentMessage& m) {
  const MessageType type = TypeOf(m);
  IngestStats::Add(stats_->messages, type);
  const absl::Time now = options_.now();
  const absl::Time steady = options_.steady_now();
  absl::MutexLock l(&n.mu);
  if (absl::Status s = TakeMessageLocked(n, session_id, now, steady); !s.ok()) return s;

  if (m.seq() == 0) {
    switch (type) {
      case MessageType::kSeriesDefs: {
        thread_local SeriesDefsView view;
        SeriesDefsFromProto(m.series_defs(), &view);
        absl::Status st = DefineLocked(n, view);
        view.defs.clear();  // views into `m`
        view.info = nullptr;
        return st;
      }
      case MessageType::kHello:
        return absl::InvalidArgumentError("a second Hello in one session");
      case MessageType::kOther:
        return absl::OkStatus();  // a session-scoped message of a newer protocol: ignored
      default:
        return absl::InvalidArgumentError(absl::StrCat(
            MessageTypeName(type), " with seq 0: only Hello and SeriesDefs are unsequenced"));
    }
  }

  NodeEntry::Epoch& ep = n.GetEpoch(agent_epoch, now, options_.limits.max_epochs_per_node);
  if (m.seq() <= ep.applied) {
    IngestStats::Add(stats_->duplicates);
    return absl::OkStatus();
  }
  switch (type) {
    case MessageType::kHello:
    case MessageType::kSeriesDefs:
      return absl::InvalidArgumentError(absl::StrCat(MessageTypeName(type), " with seq ", m.seq(),
                                                     ": Hello and SeriesDefs carry seq 0"));
    case MessageType::kSamples: {
      const v1::SampleBatch& b = m.samples();
      absl::Status st = SamplesLocked(n, m.seq(), now, b.timestamp_unix_nanos(),
                                      absl::MakeConstSpan(b.ids().data(), b.ids_size()),
                                      absl::MakeConstSpan(b.values().data(), b.values_size()));
      if (!st.ok()) return st;
      break;
    }
    case MessageType::kCollectives:
    case MessageType::kLinkEvents: {
      const bool collectives = type == MessageType::kCollectives;
      const bool empty = collectives ? (m.collectives().records_size() == 0 &&
                                        m.collectives().dropped_by_job_size() == 0)
                                     : m.link_events().events_size() == 0;
      if (empty) break;  // a tombstone (the agent dropped the message after sending it)
      if (journal_ != nullptr) {
        const uint64_t seq = m.seq();
        absl::Status s = journal_->Append(n.name, agent_epoch, seq, now, m,
                                          [this, node = n.shared_from_this(), agent_epoch, seq] {
                                            OnDurable(node, agent_epoch, seq);
                                          });
        if (!s.ok()) {
          IngestStats::Add(stats_->limit_rejections, LimitReason::kJournalBacklog);
          return absl::UnavailableError(
              absl::StrCat("not accepting seq ", seq, ": ", s.message(), "; retry later"));
        }
        ep.pending.push_back(seq);
      }
      if (collectives) {
        for (const v1::CollectiveRecord& r : m.collectives().records()) {
          PushBounded(n.collectives, ReceivedCollective{now, agent_epoch, m.seq(), r},
                      options_.windows.collective_records_per_node);
        }
        uint64_t dropped = 0;
        for (const auto& [job, count] : m.collectives().dropped_by_job()) dropped += count;
        IngestStats::Add(stats_->collective_records, m.collectives().records_size());
        if (dropped != 0) IngestStats::Add(stats_->plugin_dropped_records, dropped);
        if (observer_ != nullptr) {
          observer_->OnCollectives(n.name, agent_epoch, m.seq(), now, m.collectives());
        }
      } else {
        for (const v1::LinkEvent& ev : m.link_events().events()) {
          PushBounded(n.links, ReceivedLinkEvent{now, agent_epoch, m.seq(), ev},
                      options_.windows.link_events_per_node);
        }
        IngestStats::Add(stats_->link_events, m.link_events().events_size());
        if (observer_ != nullptr) {
          observer_->OnLinkEvents(n.name, agent_epoch, m.seq(), now, m.link_events());
        }
      }
      break;
    }
    case MessageType::kOther:
    case MessageType::kCount:
      break;  // a sequenced message of a newer protocol: taken as received
  }
  if (m.seq() > ep.applied + 1) IngestStats::Add(stats_->gap_messages, m.seq() - ep.applied - 1);
  ep.applied = m.seq();
  return absl::OkStatus();
}

void IngestCore::OnDurable(const std::shared_ptr<NodeEntry>& node, uint64_t agent_epoch,
                           uint64_t seq) {
  std::shared_ptr<SessionLink> owner;
  {
    absl::MutexLock l(&node->mu);
    if (NodeEntry::Epoch* ep = node->FindEpoch(agent_epoch)) {
      auto it = std::find(ep->pending.begin(), ep->pending.end(), seq);
      if (it != ep->pending.end()) ep->pending.erase(it);
    }
    owner = node->owner.lock();
  }
  if (owner) owner->AckReady();
}

uint64_t IngestCore::Ackable(NodeEntry& n, uint64_t agent_epoch) {
  absl::MutexLock l(&n.mu);
  NodeEntry::Epoch* ep = n.FindEpoch(agent_epoch);
  return ep == nullptr ? 0 : ep->ackable();
}

void IngestCore::EndSession(NodeEntry& n, uint64_t session_id) {
  absl::MutexLock l(&n.mu);
  if (n.owner_id != session_id) return;
  n.owner_id = 0;
  n.owner.reset();
}

std::vector<Watermark> IngestCore::Watermarks() const {
  std::vector<Watermark> out;
  for (const auto& node : AllNodes()) {
    absl::MutexLock l(&node->mu);
    for (const NodeEntry::Epoch& ep : node->epochs) {
      if (ep.ackable() > 0) out.push_back(Watermark{node->name, ep.epoch, ep.ackable()});
    }
  }
  return out;
}

namespace {

// Staleness is an interval, on the monotonic clock: a step of the wall clock must neither mark
// every node stale (forward) nor keep a dead one fresh for the step's length (back).
template <typename Node>
bool StaleLocked(const Node& n, absl::Time steady_now, absl::Time started_steady,
                 absl::Duration stale_after) ABSL_EXCLUSIVE_LOCKS_REQUIRED(n.mu) {
  if (n.hello_seen && !n.counters_here) return false;  // collectives only
  const absl::Time seen =
      n.last_seen_steady == absl::InfinitePast() ? started_steady : n.last_seen_steady;
  return steady_now - seen > stale_after;
}

template <typename Node>
NodeStatus StatusOf(const Node& n, absl::Time steady_now, absl::Time started,
                    absl::Time started_steady, absl::Duration stale_after)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(n.mu) {
  NodeStatus s;
  s.node = n.name;
  s.last_seen = n.last_seen == absl::InfinitePast() ? started : n.last_seen;
  s.collectives_only = n.hello_seen && !n.counters_here;
  s.stale = StaleLocked(n, steady_now, started_steady, stale_after);
  s.session_active = n.owner_id != 0;
  s.current_epoch = n.current_epoch;
  s.agent_version = n.agent_version;
  s.series = n.series->size();
  s.collective_records = n.collectives.size();
  s.link_events = n.links.size();
  for (const auto& ep : n.epochs) {
    s.epochs.push_back(EpochStatus{ep.epoch, ep.applied, ep.ackable()});
  }
  return s;
}

}  // namespace

std::vector<NodeStatus> IngestCore::Nodes() const {
  const absl::Time steady = options_.steady_now();
  std::vector<NodeStatus> out;
  for (const auto& node : AllNodes()) {
    absl::MutexLock l(&node->mu);
    out.push_back(StatusOf(*node, steady, started_, started_steady_, options_.stale_after));
  }
  return out;
}

std::vector<StaleChange> IngestCore::StaleChanges() {
  const absl::Time steady = options_.steady_now();
  std::vector<NodeEntry*> nodes;
  {
    // Nodes are never removed (IngestCore keeps them for its lifetime): raw pointers suffice.
    absl::MutexLock l(&mu_);
    nodes.reserve(nodes_.size());
    for (const auto& [name, entry] : nodes_) nodes.push_back(entry.get());
  }
  std::vector<StaleChange> changes;
  for (NodeEntry* node : nodes) {
    absl::MutexLock l(&node->mu);
    const bool stale = StaleLocked(*node, steady, started_steady_, options_.stale_after);
    if (stale == node->stale_reported) continue;
    node->stale_reported = stale;
    changes.push_back(StaleChange{
        node->name, stale,
        node->last_seen == absl::InfinitePast() ? started_ : node->last_seen});
  }
  std::sort(changes.begin(), changes.end(),
            [](const StaleChange& a, const StaleChange& b) { return a.node < b.node; });
  return changes;
}

std::optional<NodeStatus> IngestCore::Node(const std::string& name) const {
  std::shared_ptr<NodeEntry> node = FindNode(name);
  if (!node) return std::nullopt;
  const absl::Time steady = options_.steady_now();
  absl::MutexLock l(&node->mu);
  return StatusOf(*node, steady, started_, started_steady_, options_.stale_after);
}

absl::StatusOr<std::vector<analysis::SeriesView>> IngestCore::Series(
    const std::string& name) const {
  std::shared_ptr<NodeEntry> node = FindNode(name);
  if (!node) return absl::NotFoundError(absl::StrCat("unknown node ", name));
  absl::MutexLock l(&node->mu);
  return node->series->Views();
}

std::vector<ReceivedCollective> IngestCore::RecentCollectives(const std::string& name) const {
  std::shared_ptr<NodeEntry> node = FindNode(name);
  if (!node) return {};
  absl::MutexLock l(&node->mu);
  return std::vector<ReceivedCollective>(node->collectives.begin(), node->collectives.end());
}

std::vector<ReceivedLinkEvent> IngestCore::RecentLinkEvents(const std::string& name) const {
  std::shared_ptr<NodeEntry> node = FindNode(name);
  if (!node) return {};
  absl::MutexLock l(&node->mu);
  return std::vector<ReceivedLinkEvent>(node->links.begin(), node->links.end());
}

IngestTotals IngestCore::Totals() const {
  const absl::Time steady = options_.steady_now();
  IngestTotals t;
  for (const auto& node : AllNodes()) {
    absl::MutexLock l(&node->mu);
    ++t.nodes;
    if (StaleLocked(*node, steady, started_steady_, options_.stale_after)) ++t.stale_nodes;
    t.series += node->series->size();
    t.state_bytes += node->series->MemoryBytes();
    t.window_collective_records += node->collectives.size();
    t.window_link_events += node->links.size();
    if (node->owner_id != 0) ++t.active_sessions;
  }
  t.state_bytes += store_.pool().bytes();
  return t;
}

}  // namespace ringside::daemon
