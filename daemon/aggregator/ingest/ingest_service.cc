#include "daemon/aggregator/ingest/ingest_service.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/aggregator/ingest/sample_batch_view.h"
#include "daemon/aggregator/ingest/series_defs_view.h"
#include "daemon/aggregator/serving/async_bidi.h"
#include "daemon/common/protocol.h"
#include "daemon/common/series_set_digest.h"
#include "daemon/common/tls.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "grpcpp/support/proto_buffer_writer.h"

namespace ringside::daemon {
namespace {

grpc::Status ToGrpc(const absl::Status& s) {
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

EndReason EndReasonFor(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kAborted:
      return EndReason::kReplaced;
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kUnavailable:
      return EndReason::kLimit;
    default:
      return EndReason::kProtocolError;
  }
}

// The identities of a verified client certificate, for error messages.
std::string PeerIdentities(const grpc::AuthContext& auth) {
  std::vector<std::string> names;
  for (const char* property : {"x509_common_name", "x509_subject_alternative_name"}) {
    for (const grpc::string_ref& v : auth.FindPropertyValues(property)) {
      names.emplace_back(v.data(), v.size());
    }
  }
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

}  // namespace

// One agent's stream: the session protocol (ingest_service.h) over AsyncBidi's reactions.
class IngestSession final : public AsyncBidi,
                            public SessionLink,
                            public std::enable_shared_from_this<IngestSession> {
 public:
  // Waiting for its call (IngestService::CallRequest): Arrived, then Begin.
  IngestSession(IngestService* service, uint64_t id, LiveCalls* live)
      : AsyncBidi(live), service_(service), context_(context()), id_(id) {}

  uint64_t id() const { return id_; }

  void Arrived(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock l(&mu_);
    created_ = now;
  }

  void Begin(std::optional<grpc::Status> refuse) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock l(&mu_);
    self_ = shared_from_this();
    if (refuse) {
      FinishLocked(*refuse);
      return;
    }
    StartRead(&in_buf_);
  }

  void OnReadDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_) {
    std::shared_ptr<SessionLink> replaced;
    {
      absl::MutexLock l(&mu_);
      if (finished_) return;
      if (!ok) {
        // The agent closed its side, or the call broke: OnCancel tells the latter, once the
        // call is over.
        end_reason_ = EndReason::kClientClosed;
        FinishLocked(grpc::Status::OK);
        return;
      }
      ++messages_;
      const size_t bytes = in_buf_.Length();
      const size_t max_bytes = service_->options_.max_message_bytes;
      if (max_bytes > 0 && bytes > max_bytes) {
        IngestStats::Add(service_->stats_->limit_rejections, LimitReason::kMaxMessageBytes);
        if (!node_) IngestStats::Add(service_->stats_->refusals, RefusalReason::kLimit);
        end_reason_ = EndReason::kLimit;
        FinishLocked(grpc::Status(
            grpc::StatusCode::RESOURCE_EXHAUSTED,
            absl::StrCat("message ", messages_, " of the stream is ", bytes,
                         " bytes, over the aggregator's --max-message-bytes ", max_bytes)));
        return;
      }
      if (node_ && service_->admission_.threads() > 0 && LooksLikeDefsLocked()) {
        // A node's definitions: admitted on the admission threads (IngestService::Admission),
        // not on gRPC's, which also read every socket. The next read starts when it is done.
        service_->admission_.Push(shared_from_this());
        return;
      }
      replaced = HandleMessageLocked(bytes);
    }
    if (replaced) {
      replaced->Replace(absl::AbortedError(absl::StrCat("replaced by a newer session of node ",
                                                        node_name_, " from ", context_->peer())));
    }
  }

  // On an admission thread: the message OnReadDone queued (a SeriesDefs after the Hello).
  // Or the definitions of a held set its Hello named (definitions by reference).
  void AdmitQueued() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock l(&mu_);
    if (finished_) {
      in_buf_.Clear();
      held_set_.reset();
      return;
    }
    if (held_set_) {
      DefineFromHeldSetLocked();
      if (!finished_) {
        MaybeWriteLocked();
        StartRead(&in_buf_);
      }
      return;
    }
    HandleMessageLocked(in_buf_.Length());  // after the Hello: replaces no session
  }

  void OnWriteDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock l(&mu_);
    writing_ = false;
    if (ok) MaybeWriteLocked();
  }

  void OnCancel() override ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock l(&mu_);
    if (finished_) {
      // A read that failed because the call was cancelled, not because the agent closed.
      if (end_reason_ == EndReason::kClientClosed) end_reason_ = EndReason::kCancelled;
      return;
    }
    end_reason_ = EndReason::kCancelled;
    FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
  }

  void OnDone() override {
    bool had_hello;
    {
      absl::MutexLock l(&mu_);
      done_ = true;
      had_hello = node_ != nullptr;
    }
    service_->Remove(id_);
    if (had_hello) {
      service_->core_->EndSession(*node_, id_);
      IngestStats::Add(service_->stats_->ends, end_reason_);
    }
    service_->stats_->sessions_active.fetch_sub(1, std::memory_order_relaxed);
    std::shared_ptr<IngestSession> keep = std::move(self_);  // may delete this on return
  }

  // SessionLink
  void Replace(absl::Status status) override ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock l(&mu_);
    if (finished_) return;
    end_reason_ = EndReason::kReplaced;
    FinishLocked(ToGrpc(status));
  }

  void AckReady() override ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock l(&mu_);
    MaybeWriteLocked();
  }

  // Ends the stream (shutdown): a refusal before the Hello, an end after it.
  void End(const grpc::Status& status, EndReason reason) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock l(&mu_);
    if (finished_) return;
    if (!node_) IngestStats::Add(service_->stats_->refusals, RefusalReason::kShuttingDown);
    end_reason_ = reason;
    FinishLocked(status);
  }

  // Whether the session still waits for its Hello after this (false once it has one or ended).
  bool ExpireIfNoHello(absl::Time now, absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock l(&mu_);
    if (finished_ || node_) return false;
    if (now - created_ < timeout) return true;
    IngestStats::Add(service_->stats_->refusals, RefusalReason::kHelloTimeout);
    FinishLocked(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                              absl::StrCat("no Hello within ", absl::FormatDuration(timeout))));
    return false;
  }

 private:
  // Handles the first message. Returns the session this one replaces, if any.
  std::shared_ptr<SessionLink> HelloLocked(const v1::AgentMessage& in)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    IngestStats* stats = service_->stats_;
    if (!in.has_hello()) {
      IngestStats::Add(stats->refusals, RefusalReason::kNoHello);
      FinishLocked(grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("the first message of a stream must be a Hello, not ",
                       in.body_case() == v1::AgentMessage::BODY_NOT_SET
                           ? "an empty message"
                           : in.GetDescriptor()->FindFieldByNumber(in.body_case())->name())));
      return nullptr;
    }
    const v1::Hello& hello = in.hello();
    if (service_->options_.roles) {
      grpc::Status role = service_->options_.roles->CheckIngest(*context_);
      if (!role.ok()) {
        IngestStats::Add(stats->messages, MessageType::kHello);
        IngestStats::Add(stats->refusals, RefusalReason::kPermission);
        FinishLocked(role);
        return nullptr;
      }
    }
    if (service_->options_.check_peer_node) {
      std::shared_ptr<const grpc::AuthContext> auth = context_->auth_context();
      if (auth && !PeerMayClaimNode(*auth, hello.node())) {
        IngestStats::Add(stats->messages, MessageType::kHello);
        IngestStats::Add(stats->refusals, RefusalReason::kPermission);
        FinishLocked(
            grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                         absl::StrCat("node \"", hello.node().substr(0, 256),
                                      "\" does not match the client certificate (identities: ",
                                      PeerIdentities(*auth), ")")));
        return nullptr;
      }
    }
    absl::StatusOr<IngestCore::SessionStart> start =
        service_->core_->Hello(hello, id_, weak_from_this());
    if (!start.ok()) {
      FinishLocked(ToGrpc(start.status()));
      return nullptr;
    }
    node_ = start->node;
    node_name_ = hello.node();
    epoch_ = hello.agent_epoch();
    hello_ack_pending_ = true;
    hello_acked_seq_ = start->acked_seq;
    protocol_version_ = start->protocol_version;
    last_ack_sent_ = start->acked_seq;
    if (hello.defs_digest().size() == kSeriesSetDigestBytes) {
      held_set_ = service_->catalog_.Find(hello.defs_digest());
    }
    return std::move(start->replaced);
  }

  // The node's series defined from the set its Hello named; the HelloAck says so. When that
  // fails (a limit), the HelloAck does not: the agent sends its definitions, judged as ever.
  void DefineFromHeldSetLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::shared_ptr<const DefinitionSet> set = std::move(held_set_);  // leaves held_set_ null
    if (service_->core_->DefineFromSet(*node_, id_, set->refs, set->IdentityHints()).ok()) {
      defs_known_ = true;
      IngestStats::Add(service_->stats_->defs_by_reference);
    }
  }

  // A SeriesDefs that says it is the agent's complete set: kept for later Hellos when its digest
  // checks out (definition_catalog.h).
  void LearnLocked(const SeriesDefsView& view) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (view.complete_digest.empty() || !view.malformed.ok() ||
        view.defs.size() != view.defs_received) {
      return;
    }
    IngestStats* stats = service_->stats_;
    switch (service_->catalog_.Learn(view.complete_digest, view.defs)) {
      case DefinitionCatalog::LearnResult::kAdded:
        IngestStats::Add(stats->definition_sets_learned);
        break;
      case DefinitionCatalog::LearnResult::kMismatch:
        IngestStats::Add(stats->definition_sets_refused);
        break;
      default:
        break;
    }
    stats->definition_sets.store(static_cast<int64_t>(service_->catalog_.sets()),
                                 std::memory_order_relaxed);
  }

  // One message in in_buf_ (size checked): parsed and applied; then the next read. Returns the
  // session a Hello replaces, if any.
  std::shared_ptr<SessionLink> HandleMessageLocked(size_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::shared_ptr<SessionLink> replaced;
    if (node_ && (SamplesFromWireLocked() || (LooksLikeDefsLocked() && DefsFromWireLocked()))) {
      if (!finished_) {
        MaybeWriteLocked();
        StartRead(&in_buf_);
      }
      return nullptr;
    }
    // Parsed into this thread's message, not one a session: a batch of 1,500 samples keeps ~24 KB
    // of repeated-field storage, which per session was 16 bytes a series held by streams that
    // send every few seconds (ringside-shard-capacity-bench). Nothing keeps the message past
    // this call (the core and the journal copy what they store), and nothing called from here
    // handles another stream's message on this thread.
    thread_local v1::AgentMessage in;
    grpc::Status parsed = grpc::SerializationTraits<v1::AgentMessage>::Deserialize(&in_buf_, &in);
    if (!parsed.ok()) {
      IngestStats::Add(service_->stats_->unparsable);
      if (!node_) IngestStats::Add(service_->stats_->refusals, RefusalReason::kNoHello);
      end_reason_ = EndReason::kProtocolError;
      FinishLocked(
          grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                       absl::StrCat("message ", messages_, " of the stream (", bytes,
                                    " bytes) does not parse as a ringside.v1.AgentMessage")));
      return nullptr;
    }
    if (!node_) {
      replaced = HelloLocked(in);
      if (held_set_ && !finished_) {
        if (service_->admission_.threads() > 0) {
          // Defined on an admission thread, as sent definitions are; the HelloAck and the next
          // read wait for it.
          service_->admission_.Push(shared_from_this());
          return replaced;
        }
        DefineFromHeldSetLocked();
      }
    } else {
      absl::Status s = service_->core_->Apply(*node_, epoch_, id_, in);
      if (!s.ok()) {
        end_reason_ = EndReasonFor(s);
        FinishLocked(ToGrpc(s));
      } else if (in.has_series_defs() && !in.series_defs().complete_digest().empty()) {
        thread_local SeriesDefsView view;
        SeriesDefsFromProto(in.series_defs(), &view);
        LearnLocked(view);
        view.defs.clear();
        view.info = nullptr;
      }
      // Definitions come once a session and are large (1,500 series: ~380 KB parsed); sample
      // batches come every interval and reuse the message's storage. Keep the storage for the
      // latter only (definitions held by each session once took 6.15 GiB for 10,000 idle
      // streams, bench/shard_capacity_bench.cc; held by each thread they are still not needed).
      if (in.has_series_defs() || bytes > (size_t{1} << 20)) v1::AgentMessage().Swap(&in);
    }
    if (!finished_) {
      MaybeWriteLocked();
      StartRead(&in_buf_);
    }
    return replaced;
  }

  // Whether in_buf_ starts as a SeriesDefs does (its first tag).
  bool LooksLikeDefsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    thread_local std::vector<grpc::Slice> slices;
    slices.clear();
    const bool defs = in_buf_.Dump(&slices).ok() && !slices.empty() &&
                      MayBeSeriesDefsMessage(absl::string_view(
                          reinterpret_cast<const char*>(slices[0].begin()), slices[0].size()));
    slices.clear();
    return defs;
  }

  // A message's bytes from its slices: the one slice's, or `flat` holding them all.
  static absl::string_view Flatten(const std::vector<grpc::Slice>& slices, std::string* flat) {
    if (slices.size() == 1) {
      return absl::string_view(reinterpret_cast<const char*>(slices[0].begin()), slices[0].size());
    }
    flat->clear();
    for (const grpc::Slice& slice : slices) {
      flat->append(reinterpret_cast<const char*>(slice.begin()), slice.size());
    }
    return *flat;
  }

  // A SampleBatch (after the Hello) is decoded in place (sample_batch_view.h). False, with in_buf_
  // untouched: not one, or not in the canonical encoding; the caller parses the message.
  bool SamplesFromWireLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    thread_local std::vector<grpc::Slice> slices;
    thread_local std::string flat;
    thread_local SampleBatchView view;
    slices.clear();
    if (!in_buf_.Dump(&slices).ok() || slices.empty() ||
        !MayBeSampleBatchMessage(absl::string_view(
            reinterpret_cast<const char*>(slices[0].begin()), slices[0].size()))) {
      slices.clear();
      return false;
    }
    const bool read = ParseSampleBatchMessage(Flatten(slices, &flat), &view);
    slices.clear();
    if (!read) return false;
    in_buf_.Clear();
    absl::Status s = service_->core_->ApplySamples(*node_, epoch_, id_, view);
    if (!s.ok()) {
      end_reason_ = EndReasonFor(s);
      FinishLocked(ToGrpc(s));
    }
    return true;
  }

  // A SeriesDefs with seq 0 (after the Hello) is read in place, its definitions' names never
  // copied (series_defs_view.h). False, with in_buf_ untouched: not one, or not in the canonical
  // encoding; the caller parses the message.
  bool DefsFromWireLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    thread_local std::vector<grpc::Slice> slices;
    thread_local std::string flat;
    thread_local SeriesDefsView view;
    slices.clear();
    if (!in_buf_.Dump(&slices).ok() || slices.empty()) {
      slices.clear();
      return false;
    }
    const bool read = ParseSeriesDefsMessage(Flatten(slices, &flat), &view);
    if (read) {
      absl::Status s = service_->core_->ApplySeriesDefs(*node_, id_, view);
      if (!s.ok()) {
        end_reason_ = EndReasonFor(s);
        FinishLocked(ToGrpc(s));
      } else {
        LearnLocked(view);
      }
      in_buf_.Clear();  // the message's storage goes now, not at the next message
    }
    view.defs.clear();
    view.info = nullptr;
    view.info_storage.Clear();
    slices.clear();
    if (flat.capacity() > (1u << 20)) std::string().swap(flat);
    return read;
  }

  void MaybeWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || writing_) return;
    if (hello_ack_pending_) {
      hello_ack_pending_ = false;
      out_.Clear();
      v1::HelloAck* ack = out_.mutable_hello_ack();
      ack->set_protocol_version(protocol_version_);
      ack->set_acked_seq(hello_acked_seq_);
      ack->set_aggregator_version(service_->options_.aggregator_version);
      ack->set_defs_known(defs_known_);
      WriteLocked();
      return;
    }
    if (!node_) return;
    const uint64_t ackable = service_->core_->Ackable(*node_, epoch_);
    if (ackable <= last_ack_sent_) return;
    last_ack_sent_ = ackable;
    out_.Clear();
    out_.mutable_ack()->set_acked_seq(ackable);
    IngestStats::Add(service_->stats_->acks);
    WriteLocked();
  }

  void WriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    bool own = false;
    out_buf_.Clear();
    grpc::Status s =
        grpc::SerializationTraits<v1::AggregatorMessage>::Serialize(out_, &out_buf_, &own);
    if (!s.ok()) {
      FinishLocked(grpc::Status(grpc::StatusCode::INTERNAL, "cannot serialize a reply"));
      return;
    }
    writing_ = true;
    StartWrite(&out_buf_);
  }

  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    finished_ = true;
    Finish(status);
  }

  IngestService* const service_;
  grpc::ServerContext* const context_;
  const uint64_t id_;
  absl::Time created_ ABSL_GUARDED_BY(mu_);

  absl::Mutex mu_;
  std::shared_ptr<IngestSession> self_;  // keeps the session alive until OnDone
  grpc::ByteBuffer in_buf_;
  uint64_t messages_ = 0;
  v1::AggregatorMessage out_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer out_buf_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool hello_ack_pending_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t hello_acked_seq_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t protocol_version_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t last_ack_sent_ ABSL_GUARDED_BY(mu_) = 0;
  // Definitions by reference: the held set the Hello named, until the node is defined from it.
  std::shared_ptr<const DefinitionSet> held_set_ ABSL_GUARDED_BY(mu_);
  bool defs_known_ ABSL_GUARDED_BY(mu_) = false;
  EndReason end_reason_ = EndReason::kCancelled;
  // Set once at the Hello, under mu_; read-only afterwards.
  std::shared_ptr<IngestCore::NodeEntry> node_;
  std::string node_name_;
  uint64_t epoch_ = 0;
};

namespace {

int AdmissionThreads(int configured) {
  if (configured > 0) return configured;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / 4);
}

}  // namespace

IngestService::Admission::Admission(int threads, std::atomic<int64_t>* queued) : queued_(queued) {
  for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { Loop(); });
}

IngestService::Admission::~Admission() { Stop(); }

void IngestService::Admission::Push(std::shared_ptr<IngestSession> session) {
  absl::MutexLock l(&mu_);
  if (stop_) return;  // shutting down: the session is being ended
  queue_.push_back(std::move(session));
  if (queued_ != nullptr) queued_->fetch_add(1, std::memory_order_relaxed);
}

void IngestService::Admission::Stop() {
  std::deque<std::shared_ptr<IngestSession>> dropped;
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
    dropped.swap(queue_);
    if (queued_ != nullptr) {
      queued_->fetch_sub(static_cast<int64_t>(dropped.size()), std::memory_order_relaxed);
    }
  }
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
}

void IngestService::Admission::Loop() {
  for (;;) {
    std::shared_ptr<IngestSession> next;
    {
      absl::MutexLock l(&mu_);
      mu_.Await(absl::Condition(
          +[](Admission* a)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(a->mu_) { return a->stop_ || !a->queue_.empty(); },
          this));
      if (stop_) return;
      next = std::move(queue_.front());
      queue_.pop_front();
      if (queued_ != nullptr) queued_->fetch_sub(1, std::memory_order_relaxed);
    }
    next->AdmitQueued();
  }
}

IngestService::IngestService(IngestCore* core, IngestStats* stats, IngestServiceOptions options)
    : core_(core),
      stats_(stats),
      options_(std::move(options)),
      catalog_(options_.definition_sets),
      admission_(AdmissionThreads(options_.admission_threads),
                 stats_ != nullptr ? &stats_->admissions_queued : nullptr) {}

IngestService::~IngestService() { admission_.Stop(); }

std::optional<grpc::Status> IngestService::Register(uint64_t id,
                                                    std::shared_ptr<IngestSession> session) {
  std::optional<grpc::Status> refuse;
  {
    absl::MutexLock l(&mu_);
    if (shutting_down_) {
      IngestStats::Add(stats_->refusals, RefusalReason::kShuttingDown);
      refuse = grpc::Status(grpc::StatusCode::UNAVAILABLE, "aggregator shutting down");
    } else if (sessions_.size() >= options_.max_sessions) {
      IngestStats::Add(stats_->refusals, RefusalReason::kLimit);
      IngestStats::Add(stats_->limit_rejections, LimitReason::kMaxSessions);
      refuse = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                            absl::StrCat("too many open streams (", sessions_.size(),
                                         ", --max-sessions=", options_.max_sessions, ")"));
    } else {
      sessions_[id] = std::move(session);
      awaiting_hello_.insert(id);
    }
  }
  stats_->sessions_active.fetch_add(1, std::memory_order_relaxed);
  return refuse;
}

// One call requested on a completion queue, and the session that will carry it.
class IngestService::CallRequest final : public AsyncOp {
 public:
  CallRequest(IngestService* service, grpc::ServerCompletionQueue* cq, LiveCalls* live)
      : service_(service), cq_(cq), live_(live) {}

  void Arm() {
    session_ = std::make_shared<IngestSession>(
        service_, service_->next_id_.fetch_add(1, std::memory_order_relaxed), live_);
    service_->RequestStream(session_->context(), session_->stream(), cq_, cq_, this);
  }

  void Complete(bool ok) override {
    if (!ok) {  // the server is shutting down: no call will come
      session_.reset();
      return;
    }
    std::shared_ptr<IngestSession> session = std::move(session_);
    Arm();
    const IngestServiceOptions& o = service_->options_;
    session->Arrived(o.now ? o.now() : absl::Now());
    session->Begin(service_->Register(session->id(), session));
  }

 private:
  IngestService* const service_;
  grpc::ServerCompletionQueue* const cq_;
  LiveCalls* const live_;
  std::shared_ptr<IngestSession> session_;
};

void IngestService::Arm(grpc::ServerCompletionQueue* cq, LiveCalls* live) {
  auto request = std::make_unique<CallRequest>(this, cq, live);
  request->Arm();
  absl::MutexLock l(&mu_);
  requests_.push_back(std::move(request));
}

void IngestService::Remove(uint64_t id) {
  absl::MutexLock l(&mu_);
  sessions_.erase(id);
  awaiting_hello_.erase(id);
}

void IngestService::ExpireHellos(absl::Time now) {
  std::vector<std::pair<uint64_t, std::shared_ptr<IngestSession>>> waiting;
  std::vector<uint64_t> settled;
  {
    absl::MutexLock l(&mu_);
    waiting.reserve(awaiting_hello_.size());
    for (uint64_t id : awaiting_hello_) {
      auto it = sessions_.find(id);
      std::shared_ptr<IngestSession> s = it != sessions_.end() ? it->second.lock() : nullptr;
      if (s) {
        waiting.emplace_back(id, std::move(s));
      } else {
        settled.push_back(id);
      }
    }
  }
  for (const auto& [id, s] : waiting) {
    if (!s->ExpireIfNoHello(now, options_.hello_timeout)) settled.push_back(id);
  }
  if (settled.empty()) return;
  absl::MutexLock l(&mu_);
  for (uint64_t id : settled) awaiting_hello_.erase(id);
}

void IngestService::Shutdown() {
  std::vector<std::shared_ptr<IngestSession>> open;
  {
    absl::MutexLock l(&mu_);
    shutting_down_ = true;
    for (const auto& [id, weak] : sessions_) {
      if (auto s = weak.lock()) open.push_back(std::move(s));
    }
  }
  for (const auto& s : open) {
    s->End(grpc::Status(grpc::StatusCode::UNAVAILABLE, "aggregator shutting down"),
           EndReason::kShutdown);
  }
  admission_.Stop();  // the sessions it held are ended
}

size_t IngestService::open_sessions() const {
  absl::MutexLock l(&mu_);
  return sessions_.size();
}

}  // namespace ringside::daemon
