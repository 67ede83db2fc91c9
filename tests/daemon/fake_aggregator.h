// An in-process fake of the aggregator's Ingest.Stream on 127.0.0.1, for the uploader's tests:
// records every message per session, dedupes by (node, agent_epoch, seq) and acks the highest
// contiguous seq like the real one, checks that SampleBatch ids were defined in the session, and
// misbehaves on request (refuses, answers an unknown protocol version, stops reading, never acks,
// forgets everything). It can be stopped and restarted on the same port.
#ifndef RINGSIDE_TESTS_DAEMON_FAKE_AGGREGATOR_H_
#define RINGSIDE_TESTS_DAEMON_FAKE_AGGREGATOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "ringside/v1/ingest.grpc.pb.h"

namespace ringside::testing {

struct FakeAggregatorBehavior {
  uint32_t protocol_version = 1;  // HelloAck.protocol_version
  bool send_hello_ack = true;
  bool ack = true;  // send an Ack after every sequenced message
  // Not OK: end every session with this status right after reading its Hello.
  grpc::StatusCode refuse_code = grpc::StatusCode::OK;
  std::string refuse_message;
  bool stop_reading_after_hello = false;  // HelloAck, then never read again
  // Definitions by reference as the aggregator does them: a SeriesDefs whose complete_digest
  // matches its definitions (computed here) is remembered; a later Hello naming it gets
  // defs_known, and its ids count as defined. Forgotten by ForgetState (not by Stop/Start).
  bool definition_sets = false;
};

class FakeAggregator {
 public:
  struct Received {
    int session;  // 1, 2, ... in order of Hello
    v1::AgentMessage msg;
  };

  FakeAggregator();  // started on 127.0.0.1:<free port>
  ~FakeAggregator();

  void Start();  // again on the same port
  void Stop();   // ends every session (like a killed aggregator)
  const std::string& address() const { return address_; }

  void SetBehavior(const FakeAggregatorBehavior& b) ABSL_LOCKS_EXCLUDED(mu_);
  // Forgets the dedupe state (a restarted aggregator without memory).
  void ForgetState() ABSL_LOCKS_EXCLUDED(mu_);

  std::vector<Received> received() const ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<v1::Hello> hellos() const ABSL_LOCKS_EXCLUDED(mu_);
  // HelloAcks sent with defs_known, and definition sets remembered (definition_sets).
  int defs_known_sent() const ABSL_LOCKS_EXCLUDED(mu_);
  size_t definition_sets_held() const ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<absl::Time> hello_times() const ABSL_LOCKS_EXCLUDED(mu_);
  // The most sessions open at once (from their Hello to the end of the call): the real
  // aggregator lets one session per node live, a newer Hello replacing the older session.
  int max_open_sessions() const ABSL_LOCKS_EXCLUDED(mu_);
  // Sequenced messages accepted once each (by seq), in seq order, across sessions.
  std::map<uint64_t, v1::AgentMessage> accepted() const ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t contiguous() const ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t duplicates() const ABSL_LOCKS_EXCLUDED(mu_);
  // Problems seen: a SampleBatch id not defined in its session, a seq that differs in content
  // from the first copy, a Hello not first, ...
  std::vector<std::string> violations() const ABSL_LOCKS_EXCLUDED(mu_);

  // Polls `pred` (under no lock) until true or `timeout`; returns its last value.
  static bool WaitFor(const std::function<bool()>& pred, absl::Duration timeout);

 private:
  class Service;

  mutable absl::Mutex mu_;
  FakeAggregatorBehavior behavior_ ABSL_GUARDED_BY(mu_);
  std::vector<Received> received_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::Hello> hellos_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Time> hello_times_ ABSL_GUARDED_BY(mu_);
  int open_sessions_ ABSL_GUARDED_BY(mu_) = 0;
  int max_open_sessions_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, v1::AgentMessage> accepted_ ABSL_GUARDED_BY(mu_);
  uint64_t contiguous_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<uint64_t> above_ ABSL_GUARDED_BY(mu_);  // received beyond a gap
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t duplicates_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> violations_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::set<uint32_t>> definition_sets_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int defs_known_sent_ ABSL_GUARDED_BY(mu_) = 0;

  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

}  // namespace ringside::testing

#endif  // RINGSIDE_TESTS_DAEMON_FAKE_AGGREGATOR_H_
