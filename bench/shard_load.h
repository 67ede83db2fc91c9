// The load generator of ringside-shard-capacity-bench (issues #14, #26): simulated agents, each its
// own gRPC connection and Ingest.Stream on gRPC's generic asynchronous client (raw bytes, so the
// definitions are serialized once for every agent and each batch is written straight from its
// values by SampleBatchEncoder), their admission (Hello, HelloAck, SeriesDefs, first batch
// acked), and the driver threads that both poll the streams' completion queues and send one
// batch per agent per interval, so no event is handed from one thread to another.
#ifndef RINGSIDE_BENCH_SHARD_LOAD_H_
#define RINGSIDE_BENCH_SHARD_LOAD_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "bench/sample_batch_encoder.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/completion_queue.h"

namespace ringside::bench {

// What every agent shares: its series' steps and masks, the batch encoder, and the serialized
// SeriesDefs (one refcounted slice sent on every stream).
struct SeriesShape {
  // by_reference: every agent's Hello names the set by its digest (definitions by reference,
  // docs/agent-upload.md), and its SeriesDefs, sent when the aggregator does not hold the set, says
  // it is complete; false: an agent from before that (the definitions on every stream).
  SeriesShape(int n_series, bool by_reference);
  int n = 0;
  int idle = 0;                 // series that hold their value (idle counters and states)
  std::vector<uint64_t> steps;  // counters' increase per interval at 100 % load; 0: holds
  std::vector<uint64_t> masks;  // the counter's width
  SampleBatchEncoder encoder;
  grpc::Slice defs;             // AgentMessage{series_defs}: empty when n == 0
  std::string digest;           // the set's digest when by_reference, else empty
};

// What every stream reports to; all counters are totals over every agent.
struct LoadTotals {
  std::atomic<int64_t> opening{0};   // streams whose Hello is not yet acknowledged
  std::atomic<int64_t> admitted{0};  // HelloAck, definitions, and (paced) the first batch acked
  std::atomic<int64_t> failed{0};    // streams that ended without the bench closing them
  std::atomic<int64_t> failed_unadmitted{0};  // of them, before they were admitted
  std::atomic<int64_t> done{0};      // OnDone seen
  std::atomic<uint64_t> batches_sent{0};
  std::atomic<uint64_t> batches_acked{0};
  std::atomic<uint64_t> skipped{0};  // a batch due while the agent's previous write was in flight
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, int64_t> failures;  // distinct end status -> streams (under mu)

  void Notify();
  void AddFailure(const std::string& status);
  std::string FailureSummary();  // "3 x UNAVAILABLE: ...; 1 x ..." ("" if none)
};

// One agent's state across its streams: name, epoch, counters, sequence.
class SimAgent {
 public:
  SimAgent(int index, const SeriesShape* shape, bool batches);
  // The next cycle: values advance, seq + 1, the message encoded into `out`.
  void NextBatch(int64_t ts, std::string* out);

  const std::string& node() const { return node_; }
  uint64_t epoch() const { return epoch_; }
  uint64_t seq() const { return seq_.load(std::memory_order_acquire); }
  int index() const { return index_; }
  const SeriesShape& shape() const { return *shape_; }

 private:
  const int index_;
  const SeriesShape* const shape_;
  const std::string node_;
  const uint64_t epoch_;
  uint64_t rng_;
  int load_permille_ = 1000;
  std::vector<uint64_t> values_;
  std::atomic<uint64_t> seq_{0};
};

class Driver;

// One stream session of one agent, on the completion queue of one Driver thread: every event of
// it and every Tick run on that thread. Paced: Hello, then SeriesDefs once acknowledged, then at
// once one batch (admission ends when it is acked), then the pacer's batches. Idle: Hello and
// definitions only (admitted once they are written).
class AgentStream {
 public:
  enum class TickResult { kSent, kSkipped, kNotReady };
  enum Op { kStart, kWrite, kRead, kFinish };
  struct Tag {
    AgentStream* stream;
    Op op;
  };

  AgentStream(LoadTotals* totals, SimAgent* agent, bool batches, uint64_t resend_from_seq);
  // From any thread: prepares and starts the call on `cq`.
  void Start(grpc::GenericStub* stub, grpc::CompletionQueue* cq);
  // On the queue's thread.
  void OnEvent(Op op, bool ok);
  TickResult Tick(int64_t ts, std::string* scratch);
  // From any thread: ends the stream without counting a failure.
  void Close();
  bool done() const { return done_.load(std::memory_order_acquire); }

 private:
  enum What { kHello, kDefs, kBatch };
  void Write(grpc::ByteBuffer buffer, What what);
  void MaybeSendDefs();
  void SendFirstBatch(std::string* scratch);
  void MarkAdmitted();
  void Broken();  // a failed op: ask for the status once
  void MaybeDone();

  LoadTotals* const totals_;
  SimAgent* const agent_;
  const bool batches_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  Tag start_tag_{this, kStart}, write_tag_{this, kWrite}, read_tag_{this, kRead},
      finish_tag_{this, kFinish};
  grpc::ByteBuffer hello_;
  grpc::ByteBuffer out_;
  grpc::ByteBuffer in_;
  grpc::Status status_;
  // The queue's thread only:
  int outstanding_ = 0;  // ops started and not yet returned
  bool writing_ = false;
  bool hello_acked_ = false;
  bool defs_sent_ = false;
  bool defs_known_ = false;  // the HelloAck said the aggregator held the set
  bool first_batch_written_ = false;
  bool admitted_ = false;
  bool finishing_ = false;
  bool finished_ = false;
  What what_ = kHello;
  uint64_t acked_ = 0;
  uint64_t admit_seq_ = 0;
  std::atomic<bool> closing_{false};
  std::atomic<bool> done_{false};
};

// Every agent, its current stream and connection.
struct Fleet {
  std::vector<std::unique_ptr<SimAgent>> agents;
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs;
  std::vector<std::unique_ptr<AgentStream>> streams;  // streams[a] is agents[a]'s
};

struct AdmissionResult {
  double wall_s = 0;
  int64_t admitted = 0;
  int64_t failed = 0;    // streams that failed during the admission
  bool timed_out = false;
};

// The load generator's threads, each with its own completion queue: thread t carries agents t,
// t + P, ... of a fleet, handles every event of their streams and, once pacing, sends their
// batches: agent a of n samples at start + k / rate + (a + 0.5) / (n * rate). A thread waits on
// its queue until its next batch is due, then sends every batch due by then (never early); a
// batch's lag behind schedule is recorded for batches due in the measured window.
class Driver {
 public:
  explicit Driver(int threads);
  ~Driver();
  int threads() const { return static_cast<int>(workers_.size()); }
  grpc::CompletionQueue* queue_for(int agent) {
    return &workers_[agent % workers_.size()]->cq;
  }
  void StartPacing(Fleet* fleet, LoadTotals* totals, double rate);
  void SetWindow(absl::Time start, absl::Time end);  // which due times are recorded
  void StopPacing();                                 // waits until no thread sends

  struct Stats {
    uint64_t due = 0;        // batches due in the window
    uint64_t sent = 0;       // of them sent
    uint64_t skipped = 0;    // not sent: the agent's previous write in flight
    uint64_t not_ready = 0;  // not sent: the agent's stream had ended
    std::vector<int64_t> lag_us;  // of every sent batch, sorted
    double thread_cpu_s = 0;      // all driver threads while pacing
    double run_s = 0;
  };
  Stats stats() const;  // after StopPacing()

 private:
  struct Worker {
    grpc::CompletionQueue cq;
    std::thread thread;
    uint64_t due = 0, sent = 0, skipped = 0, not_ready = 0;
    std::vector<int64_t> lag_us;
    double cpu_s = 0;
    std::atomic<uint64_t> loops{0};  // iterations begun: StopPacing waits for two more
  };
  void Run(Worker* self, int t);

  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<bool> pacing_{false};
  Fleet* fleet_ = nullptr;
  LoadTotals* totals_ = nullptr;
  double rate_ = 1;
  absl::Time start_;
  absl::Time stopped_;
  std::atomic<int64_t> window_start_ns_{INT64_MAX};
  std::atomic<int64_t> window_end_ns_{INT64_MIN};
};

// Opens a stream for every agent of `fleet`, which has none open (new connections; `window`
// Hellos unacknowledged at a time) and waits until each is admitted or failed, or `timeout`. A
// stream that fails does not stop the others.
AdmissionResult Admit(LoadTotals& totals, Fleet& fleet, Driver& driver, int grpc_port, bool batches,
                      int window, absl::Duration timeout);
// Closes every stream (not a failure) and waits for them to end (60 s); false when some did not.
// Drops the streams and connections; the agents stay.
bool CloseAll(LoadTotals& totals, Fleet& fleet);

}  // namespace ringside::bench

#endif  // RINGSIDE_BENCH_SHARD_LOAD_H_
