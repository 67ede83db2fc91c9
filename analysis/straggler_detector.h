// Stragglers, culprit not victim.
//
// In a collective every rank waits for the last one to arrive, so a late rank shows a *shorter*
// kernel time than the others. Per communicator and per collective instance (communicator,
// function, sequence number) the detector measures every rank's lateness against the bulk of its
// communicator: its arrival minus the median arrival (from arrival times when every rank's clock
// is marked synchronised, else the median kernel duration minus its own, each measured on the
// rank's own clock). Several ranks can be late in one instance, each judged on its own: k slow
// ranks are k stragglers, and one rank's lateness does not hide another's. The median is found
// once per completed instance (nth_element, linear in the communicator's size).
//
// A rank is a straggler when, over the last `window` instances of one function of its
// communicator (each collective of a step judged on its own: an all-gather right after the
// optimizer shows nothing, the reduce-scatter after the backward pass shows the late rank),
//  - it was late by a clear margin (lateness ≥ max(min_margin, min_margin_ratio × the instance's
//    own collective time)) in at least `min_last_fraction` of them, and at least `min_count`;
//  - the time the bulk spent waiting for it (its lateness, summed) is at least
//    `min_wait_fraction` of the window's wall time (a rank that is consistently 10 ms late in a
//    3 s iteration costs nothing);
//  - it is not itself waiting on someone else: a rank that spends at least
//    `victim_wait_fraction` of that time blocked in point-to-point transfers (a pipeline stage
//    waiting on the stage before it) is a victim, not the culprit — the culprit is upstream;
//  - and it really is slower than its peers: its busy time (wall time outside every recorded
//    collective and transfer) is at least `min_busy_ratio` times the median busy time of the
//    other members of its largest communicator (its data-parallel group). Arrival order alone can
//    be structural: in a communicator that spans pipeline stages (the embedding all-reduce of the
//    first and last stage) one side always arrives last, by the pipeline's schedule, on every
//    data-parallel replica alike.
// Where the lateness is (analysis/straggler_lateness.h): each late instance's lateness splits into
// host (enqueued late) and GPU (enqueued on time, kernel started late) where the clocks allow it;
// ranks that time-share one GPU are judged with the wait that sharing explains left out. The
// finding's evidence says host_lateness_ms, gpu_lateness_ms and host_share (the host part of the
// lateness summed over its late instances with a known split, present when at least half of them
// have one); StragglerWhere (straggler_where.h) reads host, gpu or unknown from it.
// Each flagged rank has its own finding. It resolves when it was late by a margin in at most
// `resolve_fraction` of the last `window` instances of the function that flagged it, whoever else
// is late meanwhile.
//
// job_slowdown: per (communicator, function, size class) the collective's own time (the shortest
// kernel time of an instance: pure transfer, nobody waiting) against the job's baseline (median
// of its first `baseline_instances`); slower by `slowdown_ratio` over `slowdown_window` instances
// with no straggler open anywhere in the job (a culprit explains the slowdown). It resolves below `slowdown_resolve_ratio`.
#ifndef RINGSIDE_ANALYSIS_STRAGGLER_DETECTOR_H_
#define RINGSIDE_ANALYSIS_STRAGGLER_DETECTOR_H_

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "analysis/collective_observation.h"
#include "analysis/fabric_views.h"
#include "analysis/finding.h"
#include "analysis/straggler_lateness.h"

namespace ringside::analysis {

struct StragglerOptions {
  int window = 20;                  // N: instances per communicator judged together
  int min_count = 6;                // at least this many late arrivals in the window
  double min_last_fraction = 0.6;   // ... and at least this fraction of the window
  double resolve_fraction = 0.2;    // resolved when late in at most this fraction of a full window
  absl::Duration min_margin = absl::Microseconds(200);
  double min_margin_ratio = 0.5;    // lateness ≥ ratio × the instance's collective time
  double min_wait_fraction = 0.02;  // the bulk's wait ≥ 2 % of the window's wall time
  double victim_wait_fraction = 0.25;
  double min_busy_ratio = 1.03;
  // Enqueue times across nodes are compared only when 2 × the largest clock error bound is at most
  // this fraction of the margin (ranks of one node share a clock and are always compared).
  double clock_error_ratio = 0.25;
  // Leave out the kernel wait that GPU time-sharing explains (straggler_lateness.h).
  bool gpu_sharing = true;
  size_t max_pending_per_comm = 4096;  // instances waiting for their last rank
  absl::Duration pending_timeout = absl::Minutes(5);

  int baseline_instances = 20;
  int slowdown_window = 10;
  double slowdown_ratio = 1.5;
  double slowdown_resolve_ratio = 1.2;
  absl::Duration slowdown_min_delta = absl::Milliseconds(1);
};

class StragglerDetector {
 public:
  explicit StragglerDetector(StragglerOptions options = {}) : options_(options) {}

  // Feeds one record; appends findings (opened, updated on change of score, resolved).
  void Observe(const CollectiveObservation& obs, std::vector<Finding>& out);
  // Drops instances whose ranks never all reported (a rank died, records were lost).
  void Expire(absl::Time now);

  uint64_t instances_completed() const { return completed_; }
  uint64_t instances_expired() const { return expired_; }
  // Every rank of every communicator of `job` (empty: every job) with at least one judged instance.
  // Per rank, the function whose window shows it last most often. Unordered.
  std::vector<RankView> Ranks(absl::string_view job) const;

 private:
  struct Arrival {
    bool seen = false;
    RankArrival at;  // host and gpu indexes are filled in when the instance completes
  };
  struct Pending {
    std::vector<Arrival> ranks;
    uint32_t seen = 0;
    int64_t first_ns = 0;
    uint64_t bytes = 0;
  };
  struct Late {
    int32_t rank;        // comm rank
    int64_t lateness_ns;  // behind the median arrival
    int64_t host_ns = -1;  // its host and GPU parts; -1 when the clocks do not allow the split
    int64_t gpu_ns = -1;
  };
  struct Judged {
    std::vector<Late> late;  // the ranks late by a clear margin, if any
    int64_t end_ns = 0;      // when the instance completed (rank 0's stop)
    int64_t begin_ns = 0;    // rank 0's start
    int64_t span_ns = 0;     // the longest kernel time: the instance's duration
  };
  // The last `window` instances of one function, and per rank how often and by how much it was
  // late in them (kept as instances enter and leave, so judging costs no pass over the window).
  struct Window {
    struct Tally {
      int count = 0;
      int64_t lateness_ns = 0;
    };
    std::deque<Judged> instances;
    std::map<int32_t, Tally> tally;  // only ranks late at least once in the window
    int CountOf(int32_t rank) const {
      auto it = tally.find(rank);
      return it == tally.end() ? 0 : it->second.count;
    }
  };
  struct Flag {
    std::string function;  // the function whose window flagged it
    double score = 0;
  };
  // One GPU's worker: a process, and the GPU it drives for this rank when known (a process may
  // drive several: JAX, some PyTorch launchers).
  struct Worker {
    std::string host;
    int64_t global_rank = -1;
    uint32_t pid = 0;
    int32_t cuda_device = -1;  // the CUDA ordinal in process `pid`; -1 unknown
    std::string pod;  // Kubernetes pod and namespace, when the plugin knew them
    std::string pod_namespace;
    std::string gpu_bus_id;  // its GPU's PCI bus id, when the plugin knew it
    int32_t gpu_sharers = 1;  // ranks of the communicator on its GPU (itself included)
    // Its node and GPU (GpuKey) as indexes into the communicator's lists: ranks with one node
    // index share a clock, with one GPU index a GPU; -1 unknown. Kept as records arrive, so
    // judging an instance makes no strings.
    int32_t host_index = -1;
    int32_t gpu_index = -1;
  };
  struct SizeClass {
    std::vector<double> baseline;  // collective times (s) of the first instances
    std::deque<double> recent;
    bool active = false;
  };
  struct Comm {
    std::string job;
    std::string name;
    uint32_t nranks = 0;
    std::map<std::pair<std::string, uint64_t>, Pending> pending;  // (function, seq)
    std::map<std::string, Window> windows;  // by function
    std::vector<Worker> workers;  // by comm rank
    std::map<std::string, int32_t> host_index, gpu_index;  // for Worker::host_index, gpu_index
    std::map<int32_t, Flag> flagged;  // comm ranks with an open straggler finding
    std::map<std::tuple<std::string, int>, SizeClass> sizes;  // (function, log2 bytes)
    // Per function, per comm rank: moving average (over about `window` instances) of the share of
    // its kernel time spent waiting for the others; negative until its first instance.
    std::map<std::string, std::vector<double>> wait;
  };
  // Recent operations of one worker (its own clock), and the communicators it is in.
  struct OpLog {
    struct Op {
      int64_t end_ns;
      int64_t duration_ns;
      bool p2p;
    };
    std::deque<Op> ops;
    std::map<std::pair<std::string, uint64_t>, uint32_t> comms;  // (job, comm_id) → nranks
  };

  void Complete(Comm& comm, const std::string& function, const Pending& p, std::vector<Finding>& out);
  void Judge(Comm& comm, const std::string& function, std::vector<Finding>& out);
  void Emit(const Comm& comm, const std::string& function, uint32_t rank, bool active,
            double score, double wait_fraction, double victim_fraction, int count,
            std::vector<Finding>& out) const;
  void JudgeSlowdown(Comm& comm, const std::string& function, const Pending& p, int64_t base_ns,
                     int64_t end_ns, std::vector<Finding>& out);
  // Fraction of the worker's most recent `span_ns` spent in point-to-point operations, and its
  // busy time (outside any recorded operation) over that span.
  double P2pWaitFraction(const Worker& w, const std::string& job, int64_t span_ns) const;
  double BusyNs(const std::string& worker_key, int64_t span_ns) const;
  // Busy times over one span of every member of a communicator ((job, comm_id) → (worker key,
  // busy ns; -1 unknown)), computed once per judgement however many candidates need them.
  using BusyCache = std::map<std::pair<std::string, uint64_t>,
                             std::vector<std::pair<std::string, double>>>;
  // busy(candidate) / median busy of the other members of its largest communicator; 0 if unknown.
  double BusyRatio(const Comm& comm, uint32_t rank, int64_t span_ns, BusyCache& cache) const;
  void LogOp(const CollectiveObservation& obs);
  std::map<std::string, std::string> EntityOf(const Comm& comm, uint32_t rank) const;
  // The worker's process (its global rank, else host and pid) and its GPU when known: two GPUs of
  // one process are two workers. Without a device a process is one worker across its
  // communicators (within a communicator its ranks stay apart by comm rank).
  static std::string WorkerKey(const std::string& job, const Worker& w);
  // The GPU a worker runs on, as far as the records tell: node and PCI bus id, else node and CUDA
  // ordinal; "" when neither is known.
  static std::string GpuKey(const Worker& w);

  StragglerOptions options_;
  std::map<std::pair<std::string, uint64_t>, Comm> comms_;  // (job, comm_id)
  std::map<std::string, OpLog> ops_;                         // worker key (WorkerKey)
  std::map<std::string, int> open_stragglers_;               // job → stragglers open in it
  uint64_t completed_ = 0;
  uint64_t expired_ = 0;
};

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_STRAGGLER_DETECTOR_H_
