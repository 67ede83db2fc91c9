// The load generator of ringside-shard-capacity-bench (issues #14, #26): simulated agents, each its
// own gRPC connection and Ingest.Stream carried by gRPC's generic callback client (raw bytes, so
// the definitions are serialized once for every agent and each batch is written straight from
// its values by SampleBatchEncoder), their admission (Hello, HelloAck, SeriesDefs, first batch
// acked) and the pacing threads that send one batch per agent per interval.
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
#include "grpcpp/support/client_callback.h"

namespace ringside::bench {

// What every agent shares: its series' steps and masks, the batch encoder, and the serialized
// SeriesDefs (one refcounted slice sent on every stream).
struct SeriesShape {
  explicit SeriesShape(int n_series);
  int n = 0;
  int idle = 0;                 // series that hold their value (idle counters and states)
  std::vector<uint64_t> steps;  // counters' increase per interval at 100 % load; 0: holds
  std::vector<uint64_t> masks;  // the counter's width
  SampleBatchEncoder encoder;
  grpc::Slice defs;             // AgentMessage{series_defs}: empty when n == 0
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

// One stream session of one agent. Paced: Hello, then SeriesDefs once acknowledged, then at once
// one batch (admission ends when it is acked), then the pacer's batches. Idle: Hello and
// definitions only (admitted once they are written).
class AgentStream final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  enum class TickResult { kSent, kSkipped, kNotReady };

  AgentStream(LoadTotals* totals, SimAgent* agent, bool batches, uint64_t resend_from_seq);
  void Open(grpc::GenericStub* stub);
  // The sampling cycle at `ts` (from a pacing thread), `scratch` the thread's encoding buffer.
  TickResult Tick(int64_t ts, std::string* scratch);
  void Close();  // TryCancel after set_closing(): not a failure
  void set_closing() { closing_ = true; }
  bool done() const { return done_.load(); }

  void OnWriteDone(bool ok) override;
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  enum What { kHello, kDefs, kBatch };
  void MaybeSendDefs();
  void SendFirstBatch();
  void MarkAdmitted();

  LoadTotals* const totals_;
  SimAgent* const agent_;
  const bool batches_;
  grpc::ClientContext ctx_;
  grpc::ByteBuffer hello_;
  grpc::ByteBuffer out_;
  grpc::ByteBuffer in_;
  uint64_t acked_ = 0;          // reads are serialized by the library
  uint64_t admit_seq_ = 0;      // the first batch's seq, set before it is written
  What what_ = kHello;          // written before each StartWrite, read in its OnWriteDone
  std::atomic<bool> writing_{false};
  std::atomic<bool> hello_acked_{false};
  std::atomic<bool> defs_sent_{false};
  std::atomic<bool> first_batch_written_{false};
  std::atomic<bool> admitted_{false};
  std::atomic<bool> closing_{false};
  std::atomic<bool> done_{false};
};

// Every agent, its current stream and connection.
struct Fleet {
  std::vector<std::unique_ptr<SimAgent>> agents;
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs;
  std::vector<std::unique_ptr<AgentStream>> streams;
};

struct AdmissionResult {
  double wall_s = 0;
  int64_t admitted = 0;
  int64_t failed = 0;    // streams that failed during the admission
  bool timed_out = false;
};

// Opens a stream for every agent of `fleet`, which has none open (new connections; `window` Hellos unacknowledged at a
// time) and waits until each is admitted or failed, or `timeout`. A stream that fails does not
// stop the others.
AdmissionResult Admit(LoadTotals& totals, Fleet& fleet, int grpc_port, bool batches, int window,
                      absl::Duration timeout);
// Closes every stream (not a failure) and waits for them to end (60 s); false when some did not.
// Drops the streams and connections; the agents stay.
bool CloseAll(LoadTotals& totals, Fleet& fleet);

// The pacing threads: agent a of n samples at start + k / rate + (a + 0.5) / (n * rate); thread t
// of P carries agents t, t + P, ... A thread sleeps until its next batch is due but at least 1 ms,
// then sends every batch due by then (never early); a batch's lag behind schedule (up to the 1 ms
// tick when the thread keeps up) is recorded for batches due in the measured window.
class Pacer {
 public:
  Pacer(Fleet* fleet, LoadTotals* totals, double rate, int threads);
  ~Pacer() { Stop(); }
  void Start();
  void SetWindow(absl::Time start, absl::Time end);  // which due times are recorded
  void Stop();                                       // joins the threads

  struct Stats {
    uint64_t due = 0;      // batches due in the window
    uint64_t sent = 0;     // of them sent
    uint64_t skipped = 0;  // not sent: the agent's previous write in flight
    uint64_t not_ready = 0;  // not sent: the agent's stream had ended
    std::vector<int64_t> lag_us;  // of every sent batch, sorted
    double thread_cpu_s = 0;      // all pacing threads, over their run
    double run_s = 0;
  };
  Stats stats() const;  // after Stop()

 private:
  struct Thread {
    std::thread thread;
    uint64_t due = 0, sent = 0, skipped = 0, not_ready = 0;
    std::vector<int64_t> lag_us;
    double cpu_s = 0;
  };
  void Run(Thread* self, int t);

  Fleet* const fleet_;
  LoadTotals* const totals_;
  const double rate_;
  std::vector<std::unique_ptr<Thread>> threads_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> window_start_ns_{INT64_MAX};
  std::atomic<int64_t> window_end_ns_{INT64_MIN};
  absl::Time start_;
  absl::Time stopped_;
};

}  // namespace ringside::bench

#endif  // RINGSIDE_BENCH_SHARD_LOAD_H_
