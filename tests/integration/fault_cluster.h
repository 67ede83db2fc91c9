// Real ringside-aggregator and ringside-agent processes on loopback for the fault-injection tests
// (issue #18 item 3; storage_faults_test.cc): start them, feed an agent collective records through
// its plugin socket exactly as the NCCL plugin would (the plugin's own encoder), read an agent's
// upload metrics and RSS, read what the aggregator's journal holds, and cut one agent off from the
// aggregator with a relay that can stop forwarding (a network partition for that agent alone).
#ifndef RINGSIDE_TESTS_INTEGRATION_FAULT_CLUSTER_H_
#define RINGSIDE_TESTS_INTEGRATION_FAULT_CLUSTER_H_

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "tests/testing/process.h"

namespace ringside::testing {

// --- The aggregator ------------------------------------------------------------------------------

struct AggregatorPorts {
  int grpc = 0;
  int http = 0;
};

// ringside-aggregator on 127.0.0.1 ephemeral ports with `state_dir`; nullptr (and a test failure)
// when it does not come up within 20 s. `ports` receives the ports it logged. `wrap`, when set,
// turns the command line into the one to run (e.g. under an LD_PRELOAD shim: IoFault::Wrap).
std::unique_ptr<Process> StartAggregator(
    const std::string& state_dir, const std::string& out_dir,
    const std::vector<std::string>& extra, AggregatorPorts* ports,
    const std::function<std::vector<std::string>(std::vector<std::string>)>& wrap = nullptr);

// gRPC Query.GetStatus against the aggregator (2 s deadline): the number of nodes it knows, or -1
// when the call fails.
int QueryNodeCount(int grpc_port);

// --- Agents --------------------------------------------------------------------------------------

// One ringside-agent on a generated sysfs tree (one HCA), uploading to `aggregator` (host:port),
// with its /metrics on an ephemeral loopback port and its plugin socket in `dir`.
class FaultAgent {
 public:
  FaultAgent(std::string node, std::string dir);
  ~FaultAgent();
  // Starts the agent; false (and a test failure) if it did not come up.
  bool Start(const std::string& aggregator, const std::vector<std::string>& extra = {});
  Process* process() { return process_.get(); }
  const std::string& node() const { return node_; }
  int metrics_port() const { return metrics_port_; }

  // Sends `count` records of job `job`, collective sequence numbers first_seq.. (frames of at most
  // 256 records) through a fresh plugin connection; false if the socket refused.
  bool Feed(const std::string& job, uint64_t first_seq, uint64_t count);
  // Sets port 1 of its HCA in the sysfs tree (state 1 down / 4 active, phys 2 / 5).
  bool SetPortState(int state, int phys_state);
  // Records the agent took in from its plugin socket (ringside_agent_collective_records_total).
  double RecordsIn(const std::string& job);

  // One ringside_agent_upload_* value of this node (labels beyond node, e.g. type), or -1.
  double Upload(const std::string& family, const std::map<std::string, std::string>& labels = {});
  // Several such values from one scrape, in the order asked (-1 for each not found).
  std::vector<double> UploadSnapshot(
      const std::vector<std::pair<std::string, std::map<std::string, std::string>>>& wanted);
  // Waits until the aggregator acknowledged every sequenced message the agent has sent so far,
  // including one sent after this call began (so everything enqueued before it is covered).
  // `labels` pick one uploader of an agent with several ({{"aggregator", "127.0.0.1:port"}}).
  bool WaitAllAcked(absl::Duration timeout, const std::map<std::string, std::string>& labels = {});
  // VmRSS of the agent process in bytes (0 if unreadable).
  uint64_t RssBytes();

 private:
  std::string node_;
  std::string dir_;
  std::string socket_;
  std::string tree_dir_;
  std::unique_ptr<Process> process_;
  int metrics_port_ = 0;
};

// --- What the aggregator holds -----------------------------------------------------------------

// Collective records in the journal of `state_dir` (read as the aggregator replays it): for each
// "node/job/seq", how many times it is stored.
struct JournalContents {
  std::map<std::string, int> records;
  uint64_t corrupt_segments = 0;
  std::string error;  // empty when the journal could be read
};
JournalContents ReadJournalRecords(const std::string& state_dir);
std::string RecordKey(const std::string& node, const std::string& job, uint64_t seq);
// Every record of `job` on `node` with seqs [0, count) stored exactly once (gtest expectations).
void ExpectAllOnce(const JournalContents& j, const std::string& node, const std::string& job,
                   uint64_t count);
// No record stored twice.
void ExpectNoneTwice(const JournalContents& j);

// "127.0.0.1:<port>".
std::string Loopback(int port);
// The HTTP status of the aggregator's /readyz (0 when it does not answer).
int ReadyStatus(int http_port);
// SIGTERM, and expects the process to exit 0 within 20 s. Null is a no-op.
void Stop(Process* p);

// --- A partition for one agent ----------------------------------------------------------------

// A TCP relay on 127.0.0.1:port() to 127.0.0.1:target. While Cut(), nothing passes in either
// direction (what was read is held, new connections are accepted and held): the agent sees a
// silent peer, not a closed one, as in a network partition. Uncut() forwards everything held.
class PartitionRelay {
 public:
  explicit PartitionRelay(int target_port);
  ~PartitionRelay();
  int port() const { return port_; }
  // Connections accepted from now on go to `port` (an aggregator restarted on a new port).
  void SetTarget(int port) { target_ = port; }
  void Cut();
  void Uncut();
  // Bytes held because of a cut, so far (both directions).
  uint64_t held_reads() const { return held_reads_.load(); }

 private:
  void AcceptLoop();
  void Pump(int from, int to);

  std::atomic<int> target_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> held_reads_{0};
  absl::Mutex mu_;
  bool cut_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<int> fds_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  std::thread acceptor_;
};

}  // namespace ringside::testing

#endif  // RINGSIDE_TESTS_INTEGRATION_FAULT_CLUSTER_H_
