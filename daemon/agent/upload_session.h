// Uploader::Session: one Ingest.Stream session, a gRPC callback reactor whose reactions forward to
// the Uploader. Private to uploader.cc and upload_session.cc.
#ifndef RINGSIDE_DAEMON_AGENT_UPLOAD_SESSION_H_
#define RINGSIDE_DAEMON_AGENT_UPLOAD_SESSION_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "daemon/agent/uploader.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"

namespace ringside::daemon {

// Indexes of UploaderStats::sent beyond the sequenced types.
inline constexpr size_t kSentHello = kUploadTypes;
inline constexpr size_t kSentSeriesDefs = kUploadTypes + 1;
inline constexpr size_t kNoKind = kSentKinds;  // a writes-done, or nothing in flight

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

  bool writing_ = false;  // a write (or writes-done) is in flight
  bool closing_ = false;  // the read flow ended: the call is over
  bool hold_removed_ = false;
  bool ready_ = false;  // HelloAck accepted
  bool writes_done_ = false;
  bool cancelled_ = false;  // we cancelled it (a watchdog, a refusal)
  bool done_ = false;       // OnDone ran
  grpc::Status status_;
  std::string end_reason_;  // ours: version_mismatch, write_timeout, ...; empty: from status_
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

  uint64_t acked_ = 0;         // highest seq acked in this session
  uint64_t cursor_ = 0;        // order of the last buffered entry written this session
  std::vector<bool> defined_;  // ids defined in this session
  std::vector<uint32_t> pending_defs_;
  uint64_t info_sent_version_ = 0;  // Uploader::info_version_ last sent in this session
  size_t pending_pos_ = 0;
  // Definitions by reference (docs/agent-upload.md): the ids whose set the Hello named by digest
  // (ascending; empty: none offered), and whether the next SeriesDefs, if it carries exactly
  // them, says so with its digest (the aggregator did not hold the set).
  std::vector<uint32_t> offered_ids_;
  std::string offered_digest_;
  bool attach_digest_ = false;
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGENT_UPLOAD_SESSION_H_
