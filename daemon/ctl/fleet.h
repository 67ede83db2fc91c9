// The query subcommands of `ringside` across several aggregators (docs/scale.md, "The CLI across
// the fleet"). --aggregator (or $RINGSIDE_AGGREGATOR) takes a comma-separated list of HOST:PORT;
// an entry "each:HOST:PORT" resolves HOST (getaddrinfo) and asks every address it has, for a DNS
// name in front of several aggregators (a headless Service). Every aggregator is asked at once;
// the subcommand merges the answers (fleet_merge.h). An aggregator that fails is a warning on
// stderr while another answers; when none answers, the command fails as it does with one.
#ifndef RINGSIDE_DAEMON_CTL_FLEET_H_
#define RINGSIDE_DAEMON_CTL_FLEET_H_

#include <memory>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/ctl/query_client.h"

namespace ringside::daemon::ctl {

struct AggregatorTarget {
  std::string address;   // HOST:PORT, what the channel connects to
  std::string tls_name;  // the name TLS checks the certificate against; "" = the address' host
};

// The aggregators an --aggregator value names, in order, without repeats. "each:HOST:PORT"
// becomes one target per address of HOST (tls_name HOST). InvalidArgument for an empty entry or
// one without a port; NotFound when an "each:" name does not resolve.
absl::StatusOr<std::vector<AggregatorTarget>> ParseAggregatorTargets(const std::string& value);

class Fleet {
 public:
  // One client per target of `options.target` (a list, see above); no connection is made yet.
  static absl::StatusOr<std::unique_ptr<Fleet>> Connect(const ConnectionOptions& options);

  size_t size() const { return clients_.size(); }
  // More than one aggregator: the output shows incident keys, and answers are merged.
  bool many() const { return clients_.size() > 1; }
  QueryClient& at(size_t i) { return *clients_[i]; }
  const std::string& target(size_t i) const { return clients_[i]->options().target; }

  // `call(QueryClient&)` on every aggregator at once (one thread each); the results in order.
  template <typename T, typename Call>
  std::vector<absl::StatusOr<T>> All(Call call) {
    std::vector<absl::StatusOr<T>> out(size(), absl::UnknownError("not asked"));
    if (size() == 1) {
      out[0] = call(*clients_[0]);
      return out;
    }
    std::vector<std::thread> threads;
    for (size_t i = 0; i < size(); ++i) {
      threads.emplace_back([&out, &call, this, i] { out[i] = call(*clients_[i]); });
    }
    for (std::thread& t : threads) t.join();
    return out;
  }

 private:
  std::vector<std::unique_ptr<QueryClient>> clients_;
};

template <typename T>
struct FromAggregator {
  size_t index;  // into the Fleet
  T value;
};

// What a fan-out leaves: the answers, in --aggregator order. Each failure is printed as
// "ringside: warning: MESSAGE" on `err` when some aggregator answered; when none did, the error
// (the messages joined by "; "; with one aggregator its error as it was). With
// `not_found_is_no_answer`, NOT_FOUND is neither an answer nor a warning (a node that lives on
// another shard).
absl::Status SortOutFailures(const std::vector<absl::Status>& statuses, size_t answered,
                             bool not_found_is_no_answer, std::ostream& err);

template <typename T>
absl::StatusOr<std::vector<FromAggregator<T>>> Gather(std::vector<absl::StatusOr<T>> results,
                                                      std::ostream& err,
                                                      bool not_found_is_no_answer = false) {
  std::vector<FromAggregator<T>> answers;
  std::vector<absl::Status> statuses;
  for (size_t i = 0; i < results.size(); ++i) {
    statuses.push_back(results[i].status());
    if (results[i].ok()) answers.push_back({i, std::move(*results[i])});
  }
  absl::Status s = SortOutFailures(statuses, answers.size(), not_found_is_no_answer, err);
  if (!s.ok()) return s;
  return answers;
}

}  // namespace ringside::daemon::ctl

#endif  // RINGSIDE_DAEMON_CTL_FLEET_H_
