// Test helpers for the aggregator: a raw ringside.v1 client on the generated stub (no uploader
// logic: the test says exactly what goes on the wire), message builders, a fake clock, and a
// journal file system that fails writes on demand (a full disk). Every blocking call is bounded by
// the stream's deadline.
#ifndef RINGSIDE_TESTS_AGGREGATOR_INGEST_INGEST_TEST_UTIL_H_
#define RINGSIDE_TESTS_AGGREGATOR_INGEST_INGEST_TEST_UTIL_H_

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/aggregator/journal/journal_fs.h"
#include "daemon/common/protocol.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/byte_buffer.h"
#include "ringside/v1/ingest.grpc.pb.h"

namespace ringside::testing {

// One raw stream to an aggregator on 127.0.0.1:`port`. It waits for its channel to connect
// (wait_for_ready): Debian 12's gRPC 1.51 fails about one loopback connect in 500 for nothing
// (docs/reliability.md), and a fail-fast stream would end UNAVAILABLE before it began.
class RawAgent {
 public:
  RawAgent(int port, absl::Duration deadline = absl::Seconds(20))
      : channel_(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                     grpc::InsecureChannelCredentials())),
        stub_(v1::Ingest::NewStub(channel_)) {
    ctx_.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
    ctx_.set_wait_for_ready(true);
    stream_ = stub_->Stream(&ctx_);
  }
  ~RawAgent() {
    if (!finished_) {
      ctx_.TryCancel();
      (void)stream_->Finish();
    }
  }

  bool Send(const v1::AgentMessage& m) { return stream_->Write(m); }
  // The next message from the aggregator; nullopt when the stream ended.
  std::optional<v1::AggregatorMessage> Read() {
    v1::AggregatorMessage m;
    if (!stream_->Read(&m)) return std::nullopt;
    return m;
  }
  // Reads until an Ack of at least `seq`; false if the stream ends first.
  bool WaitAck(uint64_t seq) {
    if (last_ack_ >= seq) return true;
    while (auto m = Read()) {
      if (m->has_ack()) last_ack_ = std::max(last_ack_, m->ack().acked_seq());
      if (last_ack_ >= seq) return true;
    }
    return false;
  }
  // Half-closes (when still open) and returns the final status.
  grpc::Status Finish() {
    stream_->WritesDone();
    v1::AggregatorMessage m;
    while (stream_->Read(&m)) {
      if (m.has_ack()) last_ack_ = std::max(last_ack_, m.ack().acked_seq());
    }
    finished_ = true;
    return stream_->Finish();
  }
  // Reads until the aggregator ends the stream and returns its status (without half-closing).
  grpc::Status AwaitEnd() {
    v1::AggregatorMessage m;
    while (stream_->Read(&m)) {
      if (m.has_ack()) last_ack_ = std::max(last_ack_, m.ack().acked_seq());
    }
    finished_ = true;
    return stream_->Finish();
  }
  uint64_t last_ack() const { return last_ack_; }
  grpc::ClientContext& context() { return ctx_; }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Ingest::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::AgentMessage, v1::AggregatorMessage>> stream_;
  uint64_t last_ack_ = 0;
  bool finished_ = false;
};

// Sends each of `frames` as one raw message (any bytes, not necessarily a valid AgentMessage) on
// Ingest.Stream, then reads until the aggregator ends the stream; returns its status.
inline grpc::Status SendRawFrames(int port, const std::vector<std::string>& frames,
                                  absl::Duration deadline = absl::Seconds(10)) {
  auto channel =
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  ctx.set_wait_for_ready(true);  // as RawAgent's
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
      stub.PrepareCall(&ctx, "/ringside.v1.Ingest/Stream", &cq);
  void* tag = nullptr;
  bool ok = false;
  call->StartCall(reinterpret_cast<void*>(1));
  cq.Next(&tag, &ok);
  for (const std::string& f : frames) {
    if (!ok) break;
    grpc::Slice slice(f);
    grpc::ByteBuffer buf(&slice, 1);
    call->Write(buf, reinterpret_cast<void*>(2));
    cq.Next(&tag, &ok);
  }
  grpc::ByteBuffer in;
  for (int i = 0; i < 1000 && ok; ++i) {
    call->Read(&in, reinterpret_cast<void*>(3));
    cq.Next(&tag, &ok);
  }
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(4));
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return status;
}

inline v1::AgentMessage HelloMsg(const std::string& node, uint64_t epoch, uint64_t resend_from = 0,
                                 uint32_t version = daemon::kProtocolVersion,
                                 uint32_t min_version = daemon::kMinProtocolVersion) {
  v1::AgentMessage m;
  v1::Hello* h = m.mutable_hello();
  h->set_node(node);
  h->set_agent_epoch(epoch);
  h->set_protocol_version(version);
  h->set_min_protocol_version(min_version);
  h->set_agent_version("test");
  h->set_resend_from_seq(resend_from);
  return m;
}

inline v1::SeriesDef CounterDef(uint32_t id, const std::string& counter, uint32_t width,
                                bool saturates = false) {
  v1::SeriesDef d;
  d.set_id(id);
  d.set_source("infiniband");
  d.set_device("mlx5_0");
  d.set_port("1");
  d.set_counter(counter);
  d.set_priority(-1);
  d.set_kind(v1::SERIES_KIND_COUNTER);
  d.set_width(width);
  d.set_unit("count");
  d.set_saturates(saturates);
  return d;
}

inline v1::AgentMessage DefsMsg(const std::vector<v1::SeriesDef>& defs) {
  v1::AgentMessage m;
  for (const v1::SeriesDef& d : defs) *m.mutable_series_defs()->add_defs() = d;
  return m;
}

inline v1::AgentMessage SamplesMsg(uint64_t seq, int64_t t_ns,
                                   const std::vector<std::pair<uint32_t, uint64_t>>& values) {
  v1::AgentMessage m;
  m.set_seq(seq);
  v1::SampleBatch* b = m.mutable_samples();
  b->set_timestamp_unix_nanos(t_ns);
  for (const auto& [id, v] : values) {
    b->add_ids(id);
    b->add_values(v);
  }
  return m;
}

// `n` collective records whose (job "job", comm 7, seq) run from first_coll_seq upward.
inline v1::AgentMessage CollectivesMsg(uint64_t seq, uint64_t first_coll_seq, int n,
                                       const std::string& host = "node", size_t padding = 0) {
  v1::AgentMessage m;
  m.set_seq(seq);
  for (int i = 0; i < n; ++i) {
    v1::CollectiveRecord* r = m.mutable_collectives()->add_records();
    r->set_job_id("job");
    r->set_comm_id(7);
    r->set_rank(3);
    r->set_nranks(8);
    r->set_function("AllReduce");
    r->set_seq(first_coll_seq + static_cast<uint64_t>(i));
    r->set_bytes(1 << 20);
    r->set_kernel_start_unix_nanos(1000);
    r->set_kernel_stop_unix_nanos(2000);
    r->set_host(host);
    if (padding > 0) r->set_comm_name(std::string(padding, 'x'));
  }
  return m;
}

inline v1::AgentMessage LinkEventsMsg(uint64_t seq, int n, int64_t first_time_ns = 1) {
  v1::AgentMessage m;
  m.set_seq(seq);
  for (int i = 0; i < n; ++i) {
    v1::LinkEvent* e = m.mutable_link_events()->add_events();
    e->set_time_unix_nanos(first_time_ns + i);
    e->set_source("netlink");
    e->set_device("eth0");
    e->set_from(i % 2 == 0 ? v1::LINK_STATE_UP : v1::LINK_STATE_DOWN);
    e->set_to(i % 2 == 0 ? v1::LINK_STATE_DOWN : v1::LINK_STATE_UP);
  }
  return m;
}

// A clock the test moves.
class FakeClock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'800'000'000)) : now_(start) {}
  absl::Time Now() const {
    absl::MutexLock l(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock l(&mu_);
    now_ += d;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_;
};

// The real file system, except that appends and syncs fail while a fault is set (leveldb's
// ErrorEnv): FailWrites(ResourceExhausted "No space left on device") is a full disk.
class FaultJournalFileSystem final : public daemon::JournalFileSystem {
 public:
  void FailWrites(absl::Status status) {
    absl::MutexLock l(&mu_);
    fail_ = std::move(status);
  }
  void Heal() { FailWrites(absl::OkStatus()); }
  int failed_writes() const { return failed_.load(); }

  absl::StatusOr<std::unique_ptr<daemon::JournalFile>> Create(const std::string& path) override {
    if (absl::Status s = Fault(); !s.ok()) return s;
    auto f = real_->Create(path);
    if (!f.ok()) return f.status();
    return std::unique_ptr<daemon::JournalFile>(new File(this, std::move(*f)));
  }
  absl::StatusOr<std::string> ReadAll(const std::string& path) override {
    return real_->ReadAll(path);
  }
  absl::StatusOr<std::vector<std::string>> List(const std::string& dir) override {
    return real_->List(dir);
  }
  absl::StatusOr<uint64_t> Size(const std::string& path) override { return real_->Size(path); }
  absl::Status Remove(const std::string& path) override { return real_->Remove(path); }
  absl::Status MakeDirs(const std::string& dir) override { return real_->MakeDirs(dir); }
  absl::Status SyncDir(const std::string& dir) override { return real_->SyncDir(dir); }
  absl::StatusOr<std::unique_ptr<daemon::JournalDirLock>> Lock(const std::string& path) override {
    return real_->Lock(path);
  }

 private:
  class File final : public daemon::JournalFile {
   public:
    File(FaultJournalFileSystem* fs, std::unique_ptr<daemon::JournalFile> real)
        : fs_(fs), real_(std::move(real)) {}
    absl::Status Append(absl::string_view data) override {
      if (absl::Status s = fs_->Fault(); !s.ok()) return s;
      return real_->Append(data);
    }
    absl::Status Sync() override {
      if (absl::Status s = fs_->Fault(); !s.ok()) return s;
      return real_->Sync();
    }
    absl::Status Close() override { return real_->Close(); }

   private:
    FaultJournalFileSystem* fs_;
    std::unique_ptr<daemon::JournalFile> real_;
  };

  absl::Status Fault() {
    absl::MutexLock l(&mu_);
    if (!fail_.ok()) ++failed_;
    return fail_;
  }

  daemon::JournalFileSystem* real_ = daemon::DefaultJournalFileSystem();
  absl::Mutex mu_;
  absl::Status fail_;
  std::atomic<int> failed_{0};
};

}  // namespace ringside::testing

#endif  // RINGSIDE_TESTS_AGGREGATOR_INGEST_INGEST_TEST_UTIL_H_
