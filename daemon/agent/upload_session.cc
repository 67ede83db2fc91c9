// The stream side of the Uploader: what to write next, the reactions, and opening, watching and
// ending sessions. The producers, the control thread and Shutdown are in uploader.cc.
#include "daemon/agent/upload_session.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/agent/uploader.h"
#include "daemon/common/protocol.h"
#include "daemon/common/series_set_digest.h"
#include "daemon/common/steady_time.h"

namespace ringside::daemon {
namespace {

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
  if (s->attach_digest_) {
    // The first SeriesDefs after a HelloAck that did not know the set: when it is exactly the
    // set, its digest (of what is sent now) lets the aggregator keep it for other nodes.
    s->attach_digest_ = false;
    bool exact = static_cast<size_t>(defs->defs_size()) == s->offered_ids_.size();
    for (int i = 0; exact && i < defs->defs_size(); ++i) {
      exact = defs->defs(i).id() == s->offered_ids_[i];
    }
    if (exact) defs->set_complete_digest(DigestOfLocked(s->offered_ids_));
  }
  if (s->info_sent_version_ != info_version_) {
    for (const v1::InfoRecord& r : info_) *defs->add_info() = r;
    defs->set_has_info(true);
    s->info_sent_version_ = info_version_;
  }
  return defs->defs_size() > 0 || defs->has_info();
}

const v1::AgentMessage* Uploader::NextMessageLocked(Session* s) {
  if ((!s->pending_defs_.empty() || s->info_sent_version_ != info_version_) &&
      BuildDefsLocked(s)) {
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
    s->last_ack_progress_ = SteadyNow();  // the first unacked message: the ack clock starts
  }
  const uint64_t order = e->order;
  const UploadType type = e->type;
  // A resend happens only in a later session, after its HelloAck: a tombstone resent now stands
  // for a message the aggregator does not have.
  if (resend) buffer_.MarkResent(order);
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
    s->write_started_ = SteadyNow();
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
      const v1::AgentMessage* m = kind == kSentHello        ? &s->hello_
                                  : kind == kSentSeriesDefs ? &s->defs_msg_
                                                            : s->in_flight_.get();
      ++stats_.sent[kind];
      if (m != nullptr) stats_.bytes_sent += m->ByteSizeLong();
      if (kind < kUploadTypes && s->in_flight_resend_) ++stats_.resent[kind];
    }
    if (!ok) s->writes_done_ = true;  // the stream is broken: no more writes on it
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
    s->last_ack_progress_ = SteadyNow();
  }
  buffer_.Ack(acked_seq);
  cv_.Notify();  // Shutdown may be waiting for the buffer to empty
}

void Uploader::HandleHelloAckLocked(Session* s, const v1::HelloAck& ack) {
  const uint32_t v = ack.protocol_version();
  if (v < kMinProtocolVersion || v > kProtocolVersion) {
    s->cancelled_ = true;
    s->end_reason_ = "version_mismatch";
    s->end_detail_ =
        absl::StrCat("the aggregator (", ack.aggregator_version(), ") chose protocol version ", v,
                     " but this agent speaks ", kMinProtocolVersion, "..", kProtocolVersion,
                     ": upgrade the older side; retrying");
    return;
  }
  if (ack.acked_seq() + 1 < s->hello_.hello().resend_from_seq()) {
    // The aggregator should have closed the gap below resend_from_seq; if it did not, its acks
    // will stall and the ack watchdog will keep restarting the session.
    LogLimitedLocked(
        "hello_ack_below_resend",
        absl::StrCat("upload to ", options_.target, ": HelloAck acked seq ", ack.acked_seq(),
                     " below this agent's resend_from_seq ", s->hello_.hello().resend_from_seq(),
                     " (the aggregator ignores resend_from_seq?)"));
  }
  HandleAckLocked(s, ack.acked_seq());
  const absl::Time now = SteadyNow();
  s->ready_ = true;
  s->ready_at_ = now;
  s->last_ack_progress_ = now;
  s->defined_.assign(size_t{series_.size()} + 1, false);
  s->pending_defs_.clear();
  if (!s->offered_ids_.empty() && ack.defs_known() &&
      DigestOfLocked(s->offered_ids_) == s->offered_digest_) {
    // The aggregator defined them from the set the Hello named: none is sent. (A definition
    // that changed since the Hello would make another digest: then all are sent, as below.)
    for (uint32_t id : s->offered_ids_) {
      if (id < s->defined_.size()) s->defined_[id] = true;
    }
    ++stats_.defs_by_reference;
  } else if (!s->offered_ids_.empty()) {
    s->pending_defs_ = s->offered_ids_;  // the set first, in one message, with its digest
    s->attach_digest_ = true;
  }
  // Every id in use, before anything else (those defined or queued above are skipped).
  s->pending_defs_.insert(s->pending_defs_.end(), current_ids_.begin(), current_ids_.end());
  s->pending_pos_ = 0;
  s->cursor_ = 0;
  ++stats_.sessions;
  stats_.connected = true;
  if (LogLimitedLocked(
          "connected",
          absl::StrCat("connected to ", options_.target, " (aggregator ", ack.aggregator_version(),
                       ", protocol ", v, ", session ", s->number_, "): acked through seq ",
                       ack.acked_seq(), ", ", buffer_.messages(), " messages to send",
                       buffer_.resend_from_seq() <= buffer_.last_assigned_seq()
                           ? absl::StrCat(" (resending from seq ", buffer_.resend_from_seq(), ")")
                           : ""),
          logged_state_ == LoggedState::kDown)) {
    logged_state_ = LoggedState::kUp;
  }
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
  cv_.Notify();  // the control loop (or Shutdown) ends the session
  // The control thread (or Shutdown) deletes the session once it sees done_.
}

// ---- sessions ----

std::string Uploader::DigestOfLocked(const std::vector<uint32_t>& ids) const {
  SeriesSetDigest digest;
  for (uint32_t id : ids) digest.Add(series_.Def(id));
  return digest.Finish();
}

Uploader::Session* Uploader::NewSessionLocked(absl::Time now) {
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
  // Definitions by reference: the set of every id in use, named by its digest, when it fits in
  // one SeriesDefs (what the agent would send first anyway).
  std::vector<uint32_t> ids;
  ids.reserve(current_ids_.size());
  for (uint32_t id : current_ids_) {
    if (id != 0 && id <= series_.size()) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  if (!ids.empty() && ids.size() <= options_.max_defs_per_message) {
    s->offered_digest_ = DigestOfLocked(ids);
    h->set_defs_digest(s->offered_digest_);
    s->offered_ids_ = std::move(ids);
  }
  session_ = std::move(s);
  return session_.get();
}

void Uploader::StartSession(Session* s) {
  // The uploader's own backoff (on the monotonic clock) paces the attempts, so gRPC's reconnect
  // backoff is reset before each: its timer is waited for by gRPC's timer threads with an Abseil
  // wait on the wall clock, which a step back (NTP) in progress stretches by the step, leaving a
  // channel that lost its connection in TRANSIENT_FAILURE, refusing every attempt, for minutes.
  // Harmless on a connected channel.
  grpc::experimental::ChannelResetConnectionBackoff(channel_.get());
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
  err.last = absl::Now();  // exported as Unix time; `now` is the monotonic clock
  stats_.connected = false;
  if (s->ready_ && now - s->ready_at_ >= options_.backoff_reset_after) backoff_.Reset();
  const absl::Duration delay = backoff_.Next();
  next_attempt_ = now + delay;
  if (LogLimitedLocked(
          absl::StrCat(reason, ":", detail),
          absl::StrCat("upload to ", options_.target, ": session ", s->number_, " ended: ", detail,
                       " [", reason, "]; next attempt in ",
                       absl::FormatDuration(absl::Trunc(delay, absl::Milliseconds(1)))),
          logged_state_ == LoggedState::kUp)) {
    logged_state_ = LoggedState::kDown;
  }
  session_.reset();  // OnDone has run: nothing touches the reactor any more
}

grpc::ClientContext* Uploader::CheckTimersLocked(absl::Time now) {
  Session* s = session_.get();
  if (s == nullptr || s->done_ || s->cancelled_ || s->closing_) return nullptr;
  if (!s->ready_ && now - s->started_ > options_.hello_timeout) {
    s->end_reason_ = "hello_timeout";
    s->end_detail_ =
        absl::StrCat("no HelloAck within ", absl::FormatDuration(options_.hello_timeout));
  } else if (s->writing_ && now - s->write_started_ > options_.write_timeout) {
    s->end_reason_ = "write_timeout";
    s->end_detail_ = absl::StrCat("a write did not complete within ",
                                  absl::FormatDuration(options_.write_timeout),
                                  " (the aggregator stopped reading, or the connection is stuck)");
  } else if (s->ready_ && buffer_.resend_from_seq() <= buffer_.last_assigned_seq() &&
             now - s->last_ack_progress_ > options_.ack_timeout) {
    s->end_reason_ = "ack_timeout";
    s->end_detail_ =
        absl::StrCat("no ack progress within ", absl::FormatDuration(options_.ack_timeout),
                     " (acked seq ", stats_.acked_seq, ", sent ", buffer_.last_assigned_seq(), ")");
  } else {
    return nullptr;
  }
  s->cancelled_ = true;
  return &s->ctx_;
}

}  // namespace ringside::daemon
