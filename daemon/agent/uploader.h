// Streams the agent's samples, link events and collective records to the aggregator over
// ringside.v1 Ingest.Stream, losing nothing that fits in its buffer (docs/agent-upload.md).
//
// One stream session at a time, driven by a gRPC callback reactor (one per session). Sequenced
// messages wait in a bounded UploadBuffer until the aggregator acknowledges them and are resent
// after a reconnect; a control thread reopens sessions with jittered exponential backoff, runs the
// watchdogs (handshake, per-write and ack timeouts) and forwards the LinkEventLog. Producers
// (the sampler thread, the collective-record listener) never block on the network.
#ifndef RINGSIDE_DAEMON_AGENT_UPLOADER_H_
#define RINGSIDE_DAEMON_AGENT_UPLOADER_H_

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/agent/backoff.h"
#include "daemon/agent/link_events.h"
#include "daemon/agent/sampler.h"
#include "daemon/agent/series_ids.h"
#include "daemon/agent/upload_buffer.h"
#include "daemon/common/steady_time.h"
#include "daemon/common/tls.h"
#include "grpcpp/channel.h"
#include "grpcpp/security/credentials.h"
#include "prometheus/metric_family.h"
#include "ringside/v1/ingest.grpc.pb.h"

namespace ringside::daemon {

struct UploaderOptions {
  std::string target;  // the aggregator, host:port
  std::string node;
  std::string agent_version;
  std::vector<std::string> capabilities = {"samples", "collectives", "link_events"};
  TlsOptions tls;
  // Overrides `tls` when set (tests).
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  // Random (nonzero) when 0; a restarted agent must use a new one.
  uint64_t agent_epoch = 0;

  // Memory for unacknowledged messages (--upload-buffer).
  size_t buffer_bytes = size_t{64} << 20;
  // Splits, so that no message nears the aggregator's message size limit (4 MiB by default).
  size_t max_samples_per_message = 65536;
  size_t max_defs_per_message = 2048;
  size_t max_collective_records_per_message = 2048;
  size_t max_link_events_per_message = 1024;

  // Between stream attempts; also the channel's own reconnect backoff.
  BackoffOptions backoff;
  // A session that ran this long after its HelloAck resets the backoff to its initial delay.
  absl::Duration backoff_reset_after = absl::Seconds(10);
  // No HelloAck this long after the stream opened: cancel the session.
  absl::Duration hello_timeout = absl::Seconds(10);
  // A write (a message handed to gRPC) not done this long: cancel the session (the aggregator
  // stopped reading, or the connection is stuck).
  absl::Duration write_timeout = absl::Seconds(30);
  // Messages sent but the acked seq not advancing for this long: cancel the session.
  absl::Duration ack_timeout = absl::Seconds(60);
  // HTTP/2 keepalive pings (the aggregator must permit pings this often).
  absl::Duration keepalive_time = absl::Seconds(30);
  absl::Duration keepalive_timeout = absl::Seconds(10);
  // How often the LinkEventLog is checked for new events besides being woken by each append
  // (LinkEventLog::AddListener: an event goes out as soon as it is logged).
  absl::Duration link_poll_interval = absl::Milliseconds(250);
  // The same error is logged at most once per this period (with how often it recurred).
  absl::Duration error_log_period = absl::Seconds(60);

  std::function<void(const std::string&)> log;  // default: LogLine

  // Until this returns true no session opens (messages are buffered meanwhile); checked every
  // 50 ms, under the uploader's mutex (keep it quick). UploadFanout holds a replica's new node
  // uploader while the node's previous uploader to that replica flushes and closes, so the two
  // sessions of one node never replace each other there. Null: sessions open at once.
  std::function<bool()> may_open_session;
};

// Message kinds counted on the wire: the sequenced ones (UploadType) plus hello and series_defs.
inline constexpr size_t kSentKinds = kUploadTypes + 2;
absl::string_view SentKindName(
    size_t kind);  // samples, collectives, link_events, hello, series_defs

struct UploaderStats {
  struct Error {
    uint64_t count = 0;
    absl::Time last;
  };
  bool connected = false;                       // a session has completed its handshake and is open
  uint64_t attempts = 0;                        // stream sessions opened
  uint64_t reconnects = 0;                      // sessions opened after the first
  uint64_t sessions = 0;                        // handshakes completed
  uint64_t defs_by_reference = 0;  // sessions whose definitions the aggregator already held
  std::array<uint64_t, kSentKinds> sent{};      // messages written (resends included)
  std::array<uint64_t, kUploadTypes> resent{};  // of which resends after a reconnect
  std::array<uint64_t, kUploadTypes> enqueued{};
  std::array<UploadBuffer::Drops, kUploadTypes> dropped{};
  // Dropped after being sent, fate not known yet / known to have reached the aggregator.
  std::array<UploadBuffer::Drops, kUploadTypes> drop_pending{};
  std::array<UploadBuffer::Drops, kUploadTypes> drop_delivered{};
  uint64_t bytes_sent = 0;  // encoded message bytes
  uint64_t acked_seq = 0;   // highest seq the aggregator acknowledged
  uint64_t last_seq = 0;    // highest seq assigned (sent at least once)
  size_t buffer_bytes = 0;
  size_t buffer_messages = 0;
  size_t buffer_capacity = 0;
  uint64_t link_events_missed = 0;      // pushed out of the LinkEventLog before forwarded
  uint32_t series = 0;                  // ids assigned
  std::map<std::string, Error> errors;  // why sessions ended, by bounded reason
};

class Uploader {
 public:
  // Builds the channel (TLS per options.tls) and starts the control thread; the first session
  // opens at once. `links` (optional) is forwarded as LinkEvents and must outlive the uploader.
  static absl::StatusOr<std::unique_ptr<Uploader>> Create(UploaderOptions options,
                                                          const LinkEventLog* links = nullptr);
  ~Uploader();  // Shutdown(0) unless done
  Uploader(const Uploader&) = delete;
  Uploader& operator=(const Uploader&) = delete;

  // One SampleBatch from a sampling cycle (values that are not ok are left out); new series get
  // ids and are defined to the aggregator before their first use. Never blocks on the network.
  void OnSnapshot(const AgentSnapshot& snap) ABSL_LOCKS_EXCLUDED(mu_);
  // Collective records (from the NCCL plugin listener). Never dropped while a SampleBatch remains.
  void EnqueueCollectives(v1::CollectiveBatch batch) ABSL_LOCKS_EXCLUDED(mu_);

  // Waits up to `flush_timeout` for everything buffered to be acknowledged (forwarding the link
  // log once more), closes the session and stops. True if nothing was left unacknowledged.
  bool Shutdown(absl::Duration flush_timeout) ABSL_LOCKS_EXCLUDED(mu_);

  UploaderStats Stats() const ABSL_LOCKS_EXCLUDED(mu_);
  // The ringside_agent_upload_* families for /metrics (ExpositionOptions::extra_families).
  std::vector<prometheus::MetricFamily> MetricFamilies() const ABSL_LOCKS_EXCLUDED(mu_);

  uint64_t agent_epoch() const { return options_.agent_epoch; }
  const UploaderOptions& options() const { return options_; }

 private:
  class Session;

  Uploader(UploaderOptions options, const LinkEventLog* links,
           std::shared_ptr<grpc::Channel> channel);
  void ControlLoop() ABSL_LOCKS_EXCLUDED(mu_);

  // Reactions, forwarded by Session.
  void OnReadDone(Session* s, bool ok) ABSL_LOCKS_EXCLUDED(mu_);
  void OnWriteDone(Session* s, bool ok) ABSL_LOCKS_EXCLUDED(mu_);
  void OnSessionDone(Session* s, const grpc::Status& status) ABSL_LOCKS_EXCLUDED(mu_);

  // Starts the next write on the current session if it is ready and idle.
  void Pump() ABSL_LOCKS_EXCLUDED(mu_);
  const v1::AgentMessage* NextMessageLocked(Session* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool BuildDefsLocked(Session* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool MaybeRemoveHoldLocked(Session* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleHelloAckLocked(Session* s, const v1::HelloAck& ack) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleAckLocked(Session* s, uint64_t acked_seq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Session* NewSessionLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartSession(Session* s) ABSL_LOCKS_EXCLUDED(mu_);
  void EndSessionLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The context to cancel when a watchdog fired, else nullptr.
  grpc::ClientContext* CheckTimersLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Time NextWakeLocked(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool PollLinksLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PushLocked(UploadType type, v1::AgentMessage msg, size_t records)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Logs `message` unless the same `key` was logged within error_log_period (then counts it);
  // `force` logs regardless. True if logged.
  bool LogLimitedLocked(const std::string& key, const std::string& message, bool force = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  bool ControlShouldWake() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool BufferEmpty() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return buffer_.empty(); }
  bool SessionGone() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The digest of these ids' definitions (definitions by reference, series_set_digest.h).
  std::string DigestOfLocked(const std::vector<uint32_t>& ids) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const UploaderOptions options_;
  const LinkEventLog* const links_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Ingest::Stub> stub_;
  std::thread control_;

  mutable absl::Mutex mu_;
  // Wakes the control loop and Shutdown's waits (stop_, a session done, links appended, an ack):
  // their timeouts are monotonic, where Mutex::AwaitWithTimeout's are on this Abseil's wall clock.
  SteadyCondVar cv_;
  UploadBuffer buffer_ ABSL_GUARDED_BY(mu_);
  SeriesIds series_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> current_ids_ ABSL_GUARDED_BY(mu_);  // ids of the latest cycle's tables
  // The latest cycle's info records (SeriesDefs.info) and a version bumped when they change.
  std::vector<v1::InfoRecord> info_ ABSL_GUARDED_BY(mu_);
  uint64_t info_version_ ABSL_GUARDED_BY(mu_) = 0;
  std::unique_ptr<Session> session_ ABSL_GUARDED_BY(mu_);
  Backoff backoff_ ABSL_GUARDED_BY(mu_);
  absl::Time next_attempt_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool held_ ABSL_GUARDED_BY(mu_) = false;  // options_.may_open_session said not yet
  absl::Time next_link_poll_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  uint64_t link_seq_ ABSL_GUARDED_BY(mu_) = 0;
  bool links_appended_ ABSL_GUARDED_BY(mu_) = false;  // the log said it has new events
  uint64_t link_listener_ = 0;                          // LinkEventLog::AddListener's id
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool want_writes_done_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  bool warned_ack_beyond_ ABSL_GUARDED_BY(mu_) = false;
  // What the last logged connect/session-end line told the operator. A change of state is
  // always logged, so the log never ends on a state that is no longer true; repeats of the same
  // state and reason are rate-limited.
  enum class LoggedState { kNone, kUp, kDown };
  LoggedState logged_state_ ABSL_GUARDED_BY(mu_) = LoggedState::kNone;
  UploaderStats stats_ ABSL_GUARDED_BY(mu_);
  struct LogState {
    absl::Time last;
    uint64_t suppressed = 0;
  };
  std::map<std::string, LogState> log_state_ ABSL_GUARDED_BY(mu_);
};

// The families for a stats snapshot (what MetricFamilies() returns).
std::vector<prometheus::MetricFamily> UploaderStatsToFamilies(const UploaderStats& stats,
                                                              const std::string& node);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGENT_UPLOADER_H_
