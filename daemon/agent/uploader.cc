#include "daemon/agent/uploader.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "daemon/common/log.h"
#include "daemon/common/protocol.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/client_callback.h"

namespace ringside::daemon {
namespace {

constexpr size_t kSentHello = kUploadTypes;
constexpr size_t kSentSeriesDefs = kUploadTypes + 1;
constexpr size_t kNoKind = kSentKinds;  // a writes-done, or nothing in flight

int Millis(absl::Duration d) {
  return static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(d), 1, INT32_MAX));
}

v1::LinkState ToProto(collectors::LinkState s) {
  switch (s) {
    case collectors::LinkState::kDown:
      return v1::LINK_STATE_DOWN;
    case collectors::LinkState::kUp:
      return v1::LINK_STATE_UP;
    case collectors::LinkState::kUnknown:
      break;
  }
  return v1::LINK_STATE_UNKNOWN;
}

// A bounded label value for a gRPC status code: "unavailable", "failed_precondition", ...
std::string CodeReason(grpc::StatusCode code) {
  return absl::AsciiStrToLower(
      absl::StatusCodeToString(static_cast<absl::StatusCode>(static_cast<int>(code))));
}

// What an operator should do about a session that ended with `code`.
const char* Advice(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::FAILED_PRECONDITION:
      return " (the aggregator refused this agent: protocol versions or limits; retrying)";
    case grpc::StatusCode::PERMISSION_DENIED:
      return " (the aggregator refused this node: does --node-name match the CN or a DNS SAN of "
             "--tls-cert? retrying)";
    case grpc::StatusCode::UNAUTHENTICATED:
      return " (check --tls-cert, --tls-key and --tls-ca on both sides; retrying)";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return " (an aggregator limit: message size, series or nodes; retrying)";
    default:
      return "";
  }
}

}  // namespace

absl::string_view SentKindName(size_t kind) {
  if (kind < kUploadTypes) return UploadTypeName(static_cast<UploadType>(kind));
  return kind == kSentHello ? "hello" : "series_defs";
}

// One stream session. Its reactions forward to the Uploader; every field below `ctx_`, `in_` and
// `hello_` is guarded by the Uploader's mutex.
class Uploader::Session final
    : public grpc::ClientBidiReactor<v1::AgentMessage, v1::AggregatorMessage> {
 public:
  Session(Uploader* up, uint64_t number) : up_(up), number_(number) {}

  void OnReadDone(bool ok) override { up_->OnReadDone(this, ok); }
  void OnWriteDone(bool ok) override { up_->OnWriteDone(this, ok); }
  void OnWritesDoneDone(bool ok) override { up_->OnWriteDone(this, ok); }
  void OnDone(const grpc::Status& status) override { up_->OnSessionDone(this, status); }

  Uploader* const up_;
  const uint64_t number_;
  grpc::ClientContext ctx_;
  v1::AggregatorMessage in_;  // only touched by the read flow
  v1::AgentMessage hello_;    // written once before StartCall

  bool writing_ = false;       // a write (or writes-done) is in flight
  bool closing_ = false;       // the read flow ended: the call is over
  bool hold_removed_ = false;
  bool ready_ = false;         // HelloAck accepted
  bool writes_done_ = false;
  bool cancelled_ = false;     // we cancelled it (a watchdog, a refusal)
  bool done_ = false;          // OnDone ran
  grpc::Status status_;
  std::string end_reason_;     // ours: version_mismatch, write_timeout, ...; empty: from status_
  std::string end_detail_;

  absl::Time started_;
  absl::Time write_started_;
  absl::Time ready_at_;
  absl::Time last_ack_progress_;

  // The write in flight: a buffered message (kept alive even if the buffer drops it) or a
  // session-scoped SeriesDefs.
  std::shared_ptr<const v1::AgentMessage> in_flight_;
  v1::AgentMessage defs_msg_;
  size_t in_flight_kind_ = kNoKind;
  bool in_flight_resend_ = false;

  uint64_t acked_ = 0;             // highest seq acked in this session
  uint64_t cursor_ = 0;            // order of the last buffered entry written this session
  std::vector<bool> defined_;      // ids defined in this session
  std::vector<uint32_t> pending_defs_;
  size_t pending_pos_ = 0;
};

absl::StatusOr<std::unique_ptr<Uploader>> Uploader::Create(UploaderOptions options,
                                                           const LinkEventLog* links) {
  if (options.target.empty()) return absl::InvalidArgumentError("no aggregator address");
  if (options.node.empty()) return absl::InvalidArgumentError("no node name");
  std::shared_ptr<grpc::ChannelCredentials> creds = options.credentials;
  if (!creds) {
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> made =
        MakeChannelCredentials(options.tls, options.target);
    if (!made.ok()) return made.status();
    creds = *made;
  }
  while (options.agent_epoch == 0) {
    std::random_device rd;
    options.agent_epoch = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }
  if (!options.log) options.log = [](const std::string& m) { LogLine(m); };
  options.max_samples_per_message = std::max<size_t>(1, options.max_samples_per_message);
  options.max_defs_per_message = std::max<size_t>(1, options.max_defs_per_message);
  options.max_collective_records_per_message =
      std::max<size_t>(1, options.max_collective_records_per_message);
  options.max_link_events_per_message = std::max<size_t>(1, options.max_link_events_per_message);

  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, Millis(options.keepalive_time));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, Millis(options.keepalive_timeout));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, Millis(options.backoff.initial));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, Millis(options.backoff.max));
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);  // the uploader resends by itself
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(options.target, creds, args);

  std::unique_ptr<Uploader> up(new Uploader(std::move(options), links, std::move(channel)));
  up->control_ = std::thread([p = up.get()] { p->ControlLoop(); });
  return up;
}

Uploader::Uploader(UploaderOptions options, const LinkEventLog* links,
                   std::shared_ptr<grpc::Channel> channel)
    : options_(std::move(options)),
      links_(links),
      channel_(std::move(channel)),
      stub_(v1::Ingest::NewStub(channel_)),
      buffer_(options_.buffer_bytes),
      backoff_(options_.backoff) {}

Uploader::~Uploader() {
  bool done;
  {
    absl::MutexLock l(&mu_);
    done = shut_down_;
  }
  if (!done) Shutdown(absl::ZeroDuration());
}

// ---- producers ----

void Uploader::PushLocked(UploadType type, v1::AgentMessage msg, size_t records) {
  ++stats_.enqueued[static_cast<size_t>(type)];
  buffer_.Push(type, std::move(msg), records);
}

void Uploader::OnSnapshot(const AgentSnapshot& snap) {
  {
    absl::MutexLock l(&mu_);
    if (stop_) return;
    std::vector<uint32_t> changed;
    current_ids_.clear();
    v1::AgentMessage msg;
    v1::SampleBatch* batch = msg.mutable_samples();
    const int64_t ts = absl::ToUnixNanos(snap.timestamp);
    batch->set_timestamp_unix_nanos(ts);
    for (const collectors::CollectorSnapshot& cs : snap.collectors) {
      if (!cs.table) continue;
      const std::vector<uint32_t>& ids = series_.IdsFor(cs.collector, cs.table, &changed);
      current_ids_.insert(current_ids_.end(), ids.begin(), ids.end());
      for (size_t i = 0; i < ids.size() && i < cs.values.size(); ++i) {
        if (cs.values[i].status != collectors::ValueStatus::kOk) continue;
        batch->add_ids(ids[i]);
        batch->add_values(cs.values[i].raw);
        if (static_cast<size_t>(batch->ids_size()) >= options_.max_samples_per_message) {
          const size_t n = batch->ids_size();
          PushLocked(UploadType::kSamples, std::move(msg), n);
          msg = v1::AgentMessage();
          batch = msg.mutable_samples();
          batch->set_timestamp_unix_nanos(ts);
        }
      }
    }
    // A definition that changed must be sent again before its next use in this session.
    if (session_) {
      for (uint32_t id : changed) {
        if (id < session_->defined_.size()) session_->defined_[id] = false;
      }
    }
    stats_.series = series_.size();
    if (batch->ids_size() > 0) {
      const size_t n = batch->ids_size();
      PushLocked(UploadType::kSamples, std::move(msg), n);
    }
  }
  Pump();
}

void Uploader::EnqueueCollectives(v1::CollectiveBatch batch) {
  {
    absl::MutexLock l(&mu_);
    if (stop_) return;
    const size_t max = options_.max_collective_records_per_message;
    if (static_cast<size_t>(batch.records_size()) <= max) {
      v1::AgentMessage msg;
      const size_t n = batch.records_size();
      *msg.mutable_collectives() = std::move(batch);
      PushLocked(UploadType::kCollectives, std::move(msg), n);
    } else {
      for (int start = 0; start < batch.records_size(); start += static_cast<int>(max)) {
        v1::AgentMessage msg;
        v1::CollectiveBatch* part = msg.mutable_collectives();
        if (start == 0) *part->mutable_dropped_by_job() = batch.dropped_by_job();
        const int end = std::min(batch.records_size(), start + static_cast<int>(max));
        for (int i = start; i < end; ++i) *part->add_records() = std::move(*batch.mutable_records(i));
        PushLocked(UploadType::kCollectives, std::move(msg), end - start);
      }
    }
  }
  Pump();
}

bool Uploader::PollLinksLocked() {
  if (links_ == nullptr) return false;
  std::vector<LinkEventLog::Entry> entries = links_->Since(link_seq_);
  if (entries.empty()) return false;
  if (entries.front().seq > link_seq_ + 1) {
    const uint64_t missed = entries.front().seq - link_seq_ - 1;
    stats_.link_events_missed += missed;
    LogLimitedLocked("link_events_missed",
                     absl::StrCat(missed, " link events left the event ring before upload"));
  }
  link_seq_ = entries.back().seq;
  for (size_t start = 0; start < entries.size(); start += options_.max_link_events_per_message) {
    const size_t end = std::min(entries.size(), start + options_.max_link_events_per_message);
    v1::AgentMessage msg;
    v1::LinkEvents* out = msg.mutable_link_events();
    for (size_t i = start; i < end; ++i) {
      const collectors::LinkEvent& e = entries[i].event;
      v1::LinkEvent* p = out->add_events();
      p->set_time_unix_nanos(absl::ToUnixNanos(e.time));
      p->set_source(e.source);
      p->set_device(e.device);
      p->set_port(e.port);
      p->set_from(ToProto(e.from));
      p->set_to(ToProto(e.to));
      p->set_detail(e.detail);
    }
    PushLocked(UploadType::kLinkEvents, std::move(msg), end - start);
  }
  return true;
}

// ---- writing ----

bool Uploader::BuildDefsLocked(Session* s) {
  s->defs_msg_.Clear();
  v1::SeriesDefs* defs = s->defs_msg_.mutable_series_defs();
  const uint32_t known = series_.size();
  if (s->defined_.size() < size_t{known} + 1) s->defined_.resize(size_t{known} + 1, false);
  while (s->pending_pos_ < s->pending_defs_.size() &&
         static_cast<size_t>(defs->defs_size()) < options_.max_defs_per_message) {
    const uint32_t id = s->pending_defs_[s->pending_pos_++];
    if (id == 0 || id > known || s->defined_[id]) continue;
    *defs->add_defs() = series_.Def(id);
    s->defined_[id] = true;
  }
  if (s->pending_pos_ >= s->pending_defs_.size()) {
    s->pending_defs_.clear();
    s->pending_pos_ = 0;
  }
  return defs->defs_size() > 0;
}

const v1::AgentMessage* Uploader::NextMessageLocked(Session* s) {
  if (!s->pending_defs_.empty() && BuildDefsLocked(s)) {
    s->in_flight_kind_ = kSentSeriesDefs;
    return &s->defs_msg_;
  }
  const UploadBuffer::Entry* e = buffer_.NextAfter(s->cursor_);
  if (e == nullptr) return nullptr;
  if (e->type == UploadType::kSamples) {
    // Define every id of the batch that this session has not defined yet, first.
    for (uint32_t id : e->msg->samples().ids()) {
      if (id >= s->defined_.size() || !s->defined_[id]) s->pending_defs_.push_back(id);
    }
    if (!s->pending_defs_.empty() && BuildDefsLocked(s)) {
      s->in_flight_kind_ = kSentSeriesDefs;
      return &s->defs_msg_;
    }
  }
  const bool resend = e->seq != 0;
  if (!resend && buffer_.resend_from_seq() > buffer_.last_assigned_seq()) {
    s->last_ack_progress_ = absl::Now();  // the first unacked message: the ack clock starts
  }
  const uint64_t order = e->order;
  const UploadType type = e->type;
  std::shared_ptr<const v1::AgentMessage> msg = e->msg;
  if (buffer_.AssignSeq(order) == 0) {
    LogLimitedLocked("assign", "internal error: upload buffer out of order");
    return nullptr;
  }
  stats_.last_seq = buffer_.last_assigned_seq();
  s->cursor_ = order;
  s->in_flight_ = std::move(msg);
  s->in_flight_kind_ = static_cast<size_t>(type);
  s->in_flight_resend_ = resend;
  return s->in_flight_.get();
}

void Uploader::Pump() {
  Session* s;
  const v1::AgentMessage* msg = nullptr;
  {
    absl::MutexLock l(&mu_);
    s = session_.get();
    if (s == nullptr || !s->ready_ || s->writing_ || s->closing_ || s->writes_done_ ||
        s->cancelled_) {
      return;
    }
    msg = NextMessageLocked(s);
    if (msg == nullptr) {
      if (!want_writes_done_) return;
      s->writes_done_ = true;
      s->in_flight_kind_ = kNoKind;
    }
    s->writing_ = true;
    s->write_started_ = absl::Now();
  }
  // writing_ keeps the hold, so the session cannot finish (and be deleted) before this call.
  if (msg != nullptr) {
    s->StartWrite(msg);
  } else {
    s->StartWritesDone();
  }
}

bool Uploader::MaybeRemoveHoldLocked(Session* s) {
  if (s->closing_ && !s->writing_ && !s->hold_removed_) {
    s->hold_removed_ = true;
    return true;
  }
  return false;
}

// ---- reactions ----

void Uploader::OnWriteDone(Session* s, bool ok) {
  bool remove_hold;
  {
    absl::MutexLock l(&mu_);
    s->writing_ = false;
    const size_t kind = s->in_flight_kind_;
    if (ok && kind < kSentKinds) {
      const v1::AgentMessage* m = kind == kSentHello         ? &s->hello_
                                  : kind == kSentSeriesDefs ? &s->defs_msg_
                                                            : s->in_flight_.get();
      ++stats_.sent[kind];
      if (m != nullptr) stats_.bytes_sent += m->ByteSizeLong();
      if (kind < kUploadTypes && s->in_flight_resend_) ++stats_.resent[kind];
    }
    s->in_flight_.reset();
    s->in_flight_kind_ = kNoKind;
    remove_hold = MaybeRemoveHoldLocked(s);
  }
  if (remove_hold) {
    s->RemoveHold();  // the last touch: OnDone may follow at once
    return;
  }
  if (ok) Pump();
}

void Uploader::HandleAckLocked(Session* s, uint64_t acked_seq) {
  if (acked_seq > buffer_.last_assigned_seq()) {
    if (!warned_ack_beyond_) {
      warned_ack_beyond_ = true;
      options_.log(absl::StrCat("upload to ", options_.target, ": the aggregator acked seq ",
                                acked_seq, " but only ", buffer_.last_assigned_seq(),
                                " were sent (agent epoch ", options_.agent_epoch, ")"));
    }
    acked_seq = buffer_.last_assigned_seq();
  }
  if (acked_seq > stats_.acked_seq) stats_.acked_seq = acked_seq;
  if (acked_seq > s->acked_) {
    s->acked_ = acked_seq;
    s->last_ack_progress_ = absl::Now();
  }
  buffer_.Ack(acked_seq);
}

void Uploader::HandleHelloAckLocked(Session* s, const v1::HelloAck& ack) {
  const uint32_t v = ack.protocol_version();
  if (v < kMinProtocolVersion || v > kProtocolVersion) {
    s->cancelled_ = true;
    s->end_reason_ = "version_mismatch";
    s->end_detail_ = absl::StrCat("the aggregator (", ack.aggregator_version(),
                                  ") chose protocol version ", v, " but this agent speaks ",
                                  kMinProtocolVersion, "..", kProtocolVersion,
                                  ": upgrade the older side; retrying");
    return;
  }
  HandleAckLocked(s, ack.acked_seq());
  const absl::Time now = absl::Now();
  s->ready_ = true;
  s->ready_at_ = now;
  s->last_ack_progress_ = now;
  s->defined_.assign(size_t{series_.size()} + 1, false);
  s->pending_defs_ = current_ids_;  // every id in use, before anything else
  s->pending_pos_ = 0;
  s->cursor_ = 0;
  ++stats_.sessions;
  stats_.connected = true;
  LogLimitedLocked(
      "connected",
      absl::StrCat("connected to ", options_.target, " (aggregator ", ack.aggregator_version(),
                   ", protocol ", v, ", session ", s->number_, "): acked through seq ",
                   ack.acked_seq(), ", ", buffer_.messages(), " messages to send",
                   buffer_.resend_from_seq() <= buffer_.last_assigned_seq()
                       ? absl::StrCat(" (resending from seq ", buffer_.resend_from_seq(), ")")
                       : ""));
}

void Uploader::OnReadDone(Session* s, bool ok) {
  if (!ok) {
    bool remove_hold;
    {
      absl::MutexLock l(&mu_);
      s->closing_ = true;
      stats_.connected = false;
      remove_hold = MaybeRemoveHoldLocked(s);
    }
    if (remove_hold) s->RemoveHold();
    return;
  }
  bool cancel = false;
  {
    absl::MutexLock l(&mu_);
    if (s->in_.has_hello_ack()) {
      if (s->ready_) {
        s->end_reason_ = "protocol_error";
        s->end_detail_ = "the aggregator sent a second HelloAck";
        s->cancelled_ = cancel = true;
      } else {
        HandleHelloAckLocked(s, s->in_.hello_ack());
        cancel = s->cancelled_;
      }
    } else if (s->in_.has_ack()) {
      if (!s->ready_) {
        s->end_reason_ = "protocol_error";
        s->end_detail_ = "the aggregator sent an Ack before its HelloAck";
        s->cancelled_ = cancel = true;
      } else {
        HandleAckLocked(s, s->in_.ack().acked_seq());
      }
    }
    // Anything else is from a newer aggregator: ignored.
  }
  if (cancel) s->ctx_.TryCancel();
  s->StartRead(&s->in_);  // after a cancel it fails at once, which ends the read flow
  Pump();
}

void Uploader::OnSessionDone(Session* s, const grpc::Status& status) {
  absl::MutexLock l(&mu_);
  s->status_ = status;
  s->done_ = true;
  stats_.connected = false;
  // The control thread (or Shutdown) deletes the session once it sees done_.
}

// ---- sessions ----

Uploader::Session* Uploader::NewSessionLocked(absl::Time now) {
  buffer_.BeginSession();
  auto s = std::make_unique<Session>(this, ++stats_.attempts);
  if (stats_.attempts > 1) ++stats_.reconnects;
  s->started_ = now;
  s->write_started_ = now;
  s->writing_ = true;  // the Hello
  s->in_flight_kind_ = kSentHello;
  v1::Hello* h = s->hello_.mutable_hello();
  h->set_node(options_.node);
  h->set_agent_epoch(options_.agent_epoch);
  h->set_protocol_version(kProtocolVersion);
  h->set_min_protocol_version(kMinProtocolVersion);
  h->set_agent_version(options_.agent_version);
  for (const std::string& c : options_.capabilities) h->add_capabilities(c);
  h->set_resend_from_seq(buffer_.resend_from_seq());
  session_ = std::move(s);
  return session_.get();
}

void Uploader::StartSession(Session* s) {
  stub_->async()->Stream(&s->ctx_, s);
  s->AddHold();  // writes start from outside reactions (Pump)
  s->StartRead(&s->in_);
  s->StartWrite(&s->hello_);
  s->StartCall();
}

void Uploader::EndSessionLocked(absl::Time now) {
  Session* s = session_.get();
  std::string reason = s->end_reason_;
  std::string detail = s->end_detail_;
  if (reason.empty()) {
    if (s->status_.ok()) {
      reason = "closed";
      detail = "the aggregator closed the session";
    } else {
      reason = CodeReason(s->status_.error_code());
      detail = absl::StrCat(absl::AsciiStrToUpper(reason), ": ", s->status_.error_message(),
                            Advice(s->status_.error_code()));
    }
  }
  UploaderStats::Error& err = stats_.errors[reason];
  ++err.count;
  err.last = now;
  stats_.connected = false;
  if (s->ready_ && now - s->ready_at_ >= options_.backoff_reset_after) backoff_.Reset();
  const absl::Duration delay = backoff_.Next();
  next_attempt_ = now + delay;
  LogLimitedLocked(absl::StrCat(reason, ":", detail),
                   absl::StrCat("upload to ", options_.target, ": session ", s->number_,
                                " ended: ", detail, " [", reason, "]; next attempt in ",
                                absl::FormatDuration(absl::Trunc(delay, absl::Milliseconds(1)))));
  session_.reset();  // OnDone has run: nothing touches the reactor any more
}

grpc::ClientContext* Uploader::CheckTimersLocked(absl::Time now) {
  Session* s = session_.get();
  if (s == nullptr || s->done_ || s->cancelled_ || s->closing_) return nullptr;
  if (!s->ready_ && now - s->started_ > options_.hello_timeout) {
    s->end_reason_ = "hello_timeout";
    s->end_detail_ = absl::StrCat("no HelloAck within ", absl::FormatDuration(options_.hello_timeout));
  } else if (s->writing_ && now - s->write_started_ > options_.write_timeout) {
    s->end_reason_ = "write_timeout";
    s->end_detail_ = absl::StrCat("a write did not complete within ",
                                  absl::FormatDuration(options_.write_timeout),
                                  " (the aggregator stopped reading, or the connection is stuck)");
  } else if (s->ready_ && buffer_.resend_from_seq() <= buffer_.last_assigned_seq() &&
             now - s->last_ack_progress_ > options_.ack_timeout) {
    s->end_reason_ = "ack_timeout";
    s->end_detail_ = absl::StrCat("no ack progress within ",
                                  absl::FormatDuration(options_.ack_timeout), " (acked seq ",
                                  stats_.acked_seq, ", sent ", buffer_.last_assigned_seq(), ")");
  } else {
    return nullptr;
  }
  s->cancelled_ = true;
  return &s->ctx_;
}

absl::Time Uploader::NextWakeLocked(absl::Time now) const {
  absl::Duration tick = std::min({options_.hello_timeout, options_.write_timeout,
                                  options_.ack_timeout}) / 2;
  absl::Time wake = now + std::max(tick, absl::Milliseconds(1));
  if (!session_) wake = std::min(wake, next_attempt_);
  if (links_ != nullptr) wake = std::min(wake, next_link_poll_);
  return wake;
}

bool Uploader::ControlShouldWake() const {
  return stop_ || (session_ != nullptr && session_->done_);
}

bool Uploader::SessionGone() const { return session_ == nullptr || session_->done_; }

void Uploader::ControlLoop() {
  mu_.Lock();
  while (!stop_) {
    const absl::Time now = absl::Now();
    if (session_ && session_->done_) EndSessionLocked(now);
    Session* start = nullptr;
    if (!session_ && now >= next_attempt_) start = NewSessionLocked(now);
    grpc::ClientContext* cancel = CheckTimersLocked(now);
    bool pushed = false;
    if (links_ != nullptr && now >= next_link_poll_) {
      pushed = PollLinksLocked();
      next_link_poll_ = now + options_.link_poll_interval;
    }
    stats_.buffer_bytes = buffer_.bytes();
    const absl::Time wake = NextWakeLocked(now);
    mu_.Unlock();
    // Only this thread starts, cancels and deletes sessions, so `start`/`cancel` stay valid.
    if (start != nullptr) StartSession(start);
    if (cancel != nullptr) cancel->TryCancel();
    if (pushed) Pump();
    mu_.Lock();
    if (start == nullptr && cancel == nullptr && !pushed) {
      mu_.AwaitWithDeadline(absl::Condition(this, &Uploader::ControlShouldWake), wake);
    }
  }
  mu_.Unlock();
}

bool Uploader::Shutdown(absl::Duration flush_timeout) {
  const absl::Time deadline = absl::Now() + flush_timeout;
  bool pushed;
  {
    absl::MutexLock l(&mu_);
    if (shut_down_) return buffer_.empty();
    pushed = PollLinksLocked();
  }
  if (pushed) Pump();
  {
    absl::MutexLock l(&mu_);
    mu_.AwaitWithDeadline(absl::Condition(this, &Uploader::BufferEmpty), deadline);
    stop_ = true;
  }
  if (control_.joinable()) control_.join();

  // Close the session: politely (half-close, the aggregator ends it) when everything is acked,
  // else cancel.
  {
    absl::MutexLock l(&mu_);
    want_writes_done_ = buffer_.empty();
  }
  Pump();
  grpc::ClientContext* cancel = nullptr;
  {
    absl::MutexLock l(&mu_);
    mu_.AwaitWithDeadline(absl::Condition(this, &Uploader::SessionGone),
                          std::max(deadline, absl::Now() + absl::Milliseconds(100)));
    if (!SessionGone()) {
      session_->cancelled_ = true;
      cancel = &session_->ctx_;
    }
  }
  if (cancel != nullptr) cancel->TryCancel();
  absl::MutexLock l(&mu_);
  mu_.Await(absl::Condition(this, &Uploader::SessionGone));  // OnDone follows a cancel promptly
  session_.reset();
  stats_.connected = false;
  shut_down_ = true;
  if (!buffer_.empty()) {
    options_.log(absl::StrCat("upload to ", options_.target, ": stopped with ",
                              buffer_.messages(), " unacknowledged messages (", buffer_.bytes(),
                              " bytes)"));
  }
  return buffer_.empty();
}

// ---- logging and stats ----

void Uploader::LogLimitedLocked(const std::string& key, const std::string& message) {
  const absl::Time now = absl::Now();
  if (log_state_.size() > 64 && !log_state_.count(key)) log_state_.clear();
  auto [it, inserted] = log_state_.try_emplace(key);
  LogState& st = it->second;
  if (!inserted && now - st.last < options_.error_log_period) {
    ++st.suppressed;
    return;
  }
  std::string line = message;
  if (st.suppressed > 0) {
    absl::StrAppend(&line, " (", st.suppressed, " more like it since ",
                    absl::FormatTime("%H:%M:%S", st.last, absl::UTCTimeZone()), " UTC)");
  }
  st.last = now;
  st.suppressed = 0;
  options_.log(line);
}

UploaderStats Uploader::Stats() const {
  absl::MutexLock l(&mu_);
  UploaderStats s = stats_;
  for (size_t t = 0; t < kUploadTypes; ++t) s.dropped[t] = buffer_.dropped(static_cast<UploadType>(t));
  s.acked_seq = stats_.acked_seq;
  s.last_seq = buffer_.last_assigned_seq();
  s.buffer_bytes = buffer_.bytes();
  s.buffer_messages = buffer_.messages();
  s.buffer_capacity = buffer_.capacity();
  s.series = series_.size();
  return s;
}

std::vector<prometheus::MetricFamily> Uploader::MetricFamilies() const {
  return UploaderStatsToFamilies(Stats(), options_.node);
}

}  // namespace ringside::daemon
