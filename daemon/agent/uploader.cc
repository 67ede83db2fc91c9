#include "daemon/agent/uploader.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/agent/upload_session.h"
#include "daemon/common/log.h"
#include "daemon/common/steady_time.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/support/channel_arguments.h"

namespace ringside::daemon {
namespace {

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

}  // namespace

absl::string_view SentKindName(size_t kind) {
  if (kind < kUploadTypes) return UploadTypeName(static_cast<UploadType>(kind));
  return kind == kSentHello ? "hello" : "series_defs";
}

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
  // No HTTP/2 BDP probing (the aggregator has none either): a batch a second needs no window
  // tuning, and each probe is a PING round trip that wakes both sides.
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, Millis(options.backoff.initial));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, Millis(options.backoff.max));
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);  // the uploader resends by itself
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(options.target, creds, args);

  std::unique_ptr<Uploader> up(new Uploader(std::move(options), links, std::move(channel)));
  up->control_ = std::thread([p = up.get()] { p->ControlLoop(); });
  if (links != nullptr) {
    // Woken by each append: a link event goes out as soon as it is logged (issue #15), not at
    // the next poll (up to 250 ms later).
    up->link_listener_ = links->AddListener([p = up.get()] {
      absl::MutexLock l(&p->mu_);
      p->links_appended_ = true;
      p->cv_.Notify();  // wakes the control loop
    });
  }
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
  if (links_ != nullptr && link_listener_ != 0) links_->RemoveListener(link_listener_);
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
    // Info records (SeriesDefs.info): sent again only when they change.
    std::vector<const collectors::InfoRecord*> info;
    for (const collectors::CollectorSnapshot& cs : snap.collectors) {
      if (!cs.table) continue;
      for (const collectors::InfoRecord& r : cs.table->info) info.push_back(&r);
    }
    const auto same = [](const collectors::InfoRecord* a, const v1::InfoRecord& b) {
      if (a->source != b.source() || a->device != b.device() || a->port != b.port() ||
          a->labels.size() != b.labels().size()) {
        return false;
      }
      for (const auto& [k, v] : a->labels) {
        auto it = b.labels().find(k);
        if (it == b.labels().end() || it->second != v) return false;
      }
      return true;
    };
    if (info_version_ == 0 || info.size() != info_.size() ||
        !std::equal(info.begin(), info.end(), info_.begin(), same)) {
      info_.clear();
      for (const collectors::InfoRecord* r : info) {
        v1::InfoRecord& p = info_.emplace_back();
        p.set_source(r->source);
        p.set_device(r->device);
        p.set_port(r->port);
        for (const auto& [k, v] : r->labels) (*p.mutable_labels())[k] = v;
      }
      ++info_version_;
    }
    for (size_t c = 0; c < snap.collectors.size(); ++c) {
      const collectors::CollectorSnapshot& cs = snap.collectors[c];
      if (!cs.table) continue;
      // Carried over by an early cycle: the values were sent with the cycle that read them.
      const bool carried = c < snap.carried.size() && snap.carried[c];
      const std::vector<uint32_t>& ids = series_.IdsFor(cs.collector, cs.table, &changed);
      current_ids_.insert(current_ids_.end(), ids.begin(), ids.end());
      for (size_t i = 0; !carried && i < ids.size() && i < cs.values.size(); ++i) {
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
        for (int i = start; i < end; ++i)
          *part->add_records() = std::move(*batch.mutable_records(i));
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

absl::Time Uploader::NextWakeLocked(absl::Time now) const {
  absl::Duration tick =
      std::min({options_.hello_timeout, options_.write_timeout, options_.ack_timeout}) / 2;
  absl::Time wake = now + std::max(tick, absl::Milliseconds(1));
  if (!session_) wake = std::min(wake, held_ ? now + absl::Milliseconds(50) : next_attempt_);
  if (links_ != nullptr) wake = std::min(wake, next_link_poll_);
  return wake;
}

bool Uploader::ControlShouldWake() const {
  return stop_ || (session_ != nullptr && session_->done_) || links_appended_;
}

bool Uploader::SessionGone() const { return session_ == nullptr || session_->done_; }

void Uploader::ControlLoop() {
  mu_.Lock();
  while (!stop_) {
    // Timers and the reconnect schedule run on the monotonic clock (a wall-clock step must not
    // fire every watchdog at once, nor hold a reconnect for minutes).
    const absl::Time now = SteadyNow();
    if (session_ && session_->done_) EndSessionLocked(now);
    Session* start = nullptr;
    if (!session_ && now >= next_attempt_) {
      held_ = options_.may_open_session && !options_.may_open_session();
      if (!held_) start = NewSessionLocked(now);
    }
    grpc::ClientContext* cancel = CheckTimersLocked(now);
    bool pushed = false;
    if (links_ != nullptr && (now >= next_link_poll_ || links_appended_)) {
      links_appended_ = false;
      pushed = PollLinksLocked();
      next_link_poll_ = now + options_.link_poll_interval;
    }
    const absl::Time wake = NextWakeLocked(now);
    mu_.Unlock();
    // Only this thread starts, cancels and deletes sessions, so `start`/`cancel` stay valid.
    if (start != nullptr) StartSession(start);
    if (cancel != nullptr) cancel->TryCancel();
    if (pushed) Pump();
    mu_.Lock();
    if (start == nullptr && cancel == nullptr && !pushed) {
      cv_.AwaitWithTimeout(
          mu_, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return ControlShouldWake(); },
          wake - SteadyNow());
    }
  }
  mu_.Unlock();
}

bool Uploader::Shutdown(absl::Duration flush_timeout) {
  const absl::Time deadline = SteadyNow() + flush_timeout;
  bool pushed;
  {
    absl::MutexLock l(&mu_);
    if (shut_down_) return buffer_.empty();
    pushed = PollLinksLocked();
  }
  if (pushed) Pump();
  {
    absl::MutexLock l(&mu_);
    cv_.AwaitWithTimeout(
        mu_, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return BufferEmpty(); },
        deadline - SteadyNow());
    stop_ = true;
    cv_.Notify();
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
    cv_.AwaitWithTimeout(
        mu_, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return SessionGone(); },
        std::max(deadline - SteadyNow(), absl::Milliseconds(100)));
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
    options_.log(absl::StrCat("upload to ", options_.target, ": stopped with ", buffer_.messages(),
                              " unacknowledged messages (", buffer_.bytes(), " bytes)"));
  }
  return buffer_.empty();
}

// ---- logging and stats ----

bool Uploader::LogLimitedLocked(const std::string& key, const std::string& message, bool force) {
  const absl::Time now = absl::Now();
  if (log_state_.size() > 64 && !log_state_.count(key)) log_state_.clear();
  auto [it, inserted] = log_state_.try_emplace(key);
  LogState& st = it->second;
  if (!force && !inserted && now - st.last < options_.error_log_period) {
    ++st.suppressed;
    return false;
  }
  std::string line = message;
  if (st.suppressed > 0) {
    absl::StrAppend(&line, " (", st.suppressed, " more like it since ",
                    absl::FormatTime("%H:%M:%S", st.last, absl::UTCTimeZone()), " UTC)");
  }
  st.last = now;
  st.suppressed = 0;
  options_.log(line);
  return true;
}

UploaderStats Uploader::Stats() const {
  absl::MutexLock l(&mu_);
  UploaderStats s = stats_;
  for (size_t t = 0; t < kUploadTypes; ++t) {
    const UploadBuffer::DropCounts& c = buffer_.counts(static_cast<UploadType>(t));
    s.dropped[t] = c.dropped;
    s.drop_pending[t] = c.pending;
    s.drop_delivered[t] = c.delivered;
  }
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
