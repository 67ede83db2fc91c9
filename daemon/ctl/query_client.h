// The connection of the `ringside` query subcommands to the aggregator's Query API: the flags
// they share (--aggregator, --tls-*, --timeout, -o), the channel (TLS through
// daemon/common/tls.h, as the agent builds it), unary calls with a deadline, and gRPC errors
// turned into messages an on-call engineer can act on.
#ifndef RINGSIDE_DAEMON_CTL_QUERY_CLIENT_H_
#define RINGSIDE_DAEMON_CTL_QUERY_CLIENT_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/common/tls.h"
#include "daemon/ctl/args.h"
#include "daemon/ctl/command.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "ringside/v1/query.grpc.pb.h"

namespace ringside::daemon::ctl {

inline constexpr char kDefaultAggregator[] = "localhost:9472";
inline constexpr char kAggregatorEnv[] = "RINGSIDE_AGGREGATOR";

enum class OutputFormat { kTable, kJson };

struct ConnectionOptions {
  // HOST:PORT; in the flags, a comma-separated list (fleet.h), one entry per QueryClient.
  std::string target = kDefaultAggregator;
  // The name TLS checks the aggregator's certificate against, when `target` is an address
  // resolved from it ("each:NAME:PORT"); empty: the host of `target`.
  std::string tls_name;
  TlsOptions tls;
  absl::Duration timeout = absl::Seconds(10);  // deadline of each call
};

// The flags every query subcommand takes, appended after its own in --help.
const std::vector<FlagSpec>& ConnectionFlagSpecs();
// The help paragraph on --aggregator/RINGSIDE_AGGREGATOR and TLS.
const char* ConnectionHelp();

// From the parsed flags; `env_aggregator` is $RINGSIDE_AGGREGATOR (nullptr or empty: unset).
absl::StatusOr<ConnectionOptions> ConnectionFromArgs(const ParsedArgs& args,
                                                     const char* env_aggregator);
absl::StatusOr<OutputFormat> OutputFromArgs(const ParsedArgs& args);

class QueryClient {
 public:
  // Builds the channel; does not connect yet (the first call does, within its deadline).
  static absl::StatusOr<std::unique_ptr<QueryClient>> Connect(const ConnectionOptions& options);

  absl::StatusOr<v1::ListIncidentsResponse> ListIncidents(const v1::ListIncidentsRequest& req);
  absl::StatusOr<v1::Incident> GetIncident(uint64_t id);
  absl::StatusOr<v1::ListLinksResponse> ListLinks(const v1::ListLinksRequest& req);
  absl::StatusOr<v1::NodeStatus> GetNode(const std::string& node);
  absl::StatusOr<v1::TopStragglersResponse> TopStragglers(const v1::TopStragglersRequest& req);
  absl::StatusOr<v1::ClusterStatus> GetStatus();
  absl::StatusOr<v1::TopologyView> GetTopology(const v1::GetTopologyRequest& req);

  v1::Query::Stub& stub() { return *stub_; }
  const ConnectionOptions& options() const { return options_; }

  // `status` of a call as an absl::Status whose message says what went wrong and where:
  // "cannot reach aggregator at HOST:PORT: ..." for UNAVAILABLE and DEADLINE_EXCEEDED.
  absl::Status Explain(const grpc::Status& status) const;

 private:
  explicit QueryClient(ConnectionOptions options, std::shared_ptr<grpc::Channel> channel);

  ConnectionOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Query::Stub> stub_;
};

// What every query subcommand does first: parse its flags plus the connection flags, print
// --help, check -o and the connection flags, and connect. On success `args`, `format`,
// `fleet` and `client` are set and nullopt is returned; otherwise the exit code to return (0 after
// --help, 2 after a usage error printed as "ringside NAME: ...").
class Fleet;
struct QueryInvocation {
  ParsedArgs args;
  OutputFormat format = OutputFormat::kTable;
  std::shared_ptr<Fleet> fleet;   // every aggregator --aggregator names (fleet.h)
  QueryClient* client = nullptr;  // the first of them
};
std::optional<int> PrepareQueryCommand(const std::string& name, const std::string& usage,
                                       const std::vector<FlagSpec>& own_specs,
                                       const std::vector<std::string>& argv, CommandContext& ctx,
                                       QueryInvocation& out);

// Prints "ringside NAME: message" on stderr and returns kExitError.
int FailCommand(CommandContext& ctx, const std::string& name, const std::string& message);

}  // namespace ringside::daemon::ctl

#endif  // RINGSIDE_DAEMON_CTL_QUERY_CLIENT_H_
