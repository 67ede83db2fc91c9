#include "daemon/ctl/query_client.h"

#include <cstdlib>
#include <ostream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/grpc_retry.h"
#include "daemon/ctl/fleet.h"
#include "daemon/ctl/relative_time.h"
#include "grpcpp/create_channel.h"

namespace ringside::daemon::ctl {

const std::vector<FlagSpec>& ConnectionFlagSpecs() {
  static const auto* specs = new std::vector<FlagSpec>{
      {"output", "o", true, "FORMAT", "table (aligned, for people) or json (stable, keys sorted)",
       "table"},
      {"aggregator", "", true, "HOST:PORT",
       "the aggregator's gRPC address (else $RINGSIDE_AGGREGATOR); a comma-separated list asks "
       "every one and merges, each:HOST:PORT every address of HOST",
       kDefaultAggregator},
      {"timeout", "", true, "DURATION", "deadline of each call to the aggregator", "10s"},
      {"tls-ca", "", true, "FILE", "PEM CA that signed the aggregator's certificate (enables TLS)",
       ""},
      {"tls-cert", "", true, "FILE", "PEM client certificate, for mTLS (with --tls-ca)", ""},
      {"tls-key", "", true, "FILE", "PEM private key of --tls-cert", ""},
      {"token-file", "", true, "FILE",
       "a read-only bearer token for the Query API (with --tls-ca), instead of a reader "
       "certificate",
       ""},
      {"allow-insecure", "", false, "", "allow plaintext to a non-loopback aggregator", ""},
  };
  return *specs;
}

const char* ConnectionHelp() {
  return "The aggregator is --aggregator, else $RINGSIDE_AGGREGATOR, else localhost:9472.\n"
         "With several (agg-0a:9472,agg-0b:9472,agg-1a:9472 or each:NAME:9472), every one is\n"
         "asked, the answers are merged and incidents deduplicated by key; one that cannot be\n"
         "reached is a warning while another answers.\n"
         "Plaintext is used only to loopback (or with --allow-insecure); give --tls-ca (and\n"
         "--tls-cert/--tls-key when the aggregator requires client certificates) otherwise.\n"
         "Under TLS, reading needs a reader identity: a certificate the aggregator maps to the\n"
         "reader role (--reader-identities), or a token (--token-file, over TLS only).\n";
}

absl::StatusOr<ConnectionOptions> ConnectionFromArgs(const ParsedArgs& args,
                                                     const char* env_aggregator) {
  ConnectionOptions o;
  if (env_aggregator != nullptr && *env_aggregator != '\0') o.target = env_aggregator;
  if (args.Has("aggregator")) o.target = args.Get("aggregator");
  o.target = std::string(absl::StripAsciiWhitespace(o.target));
  if (o.target.empty()) return absl::InvalidArgumentError("--aggregator is empty");
  if (args.Has("timeout")) {
    absl::StatusOr<absl::Duration> d = ParsePositiveDuration(args.Get("timeout"));
    if (!d.ok())
      return absl::InvalidArgumentError(absl::StrCat("--timeout: ", d.status().message()));
    o.timeout = *d;
  }
  o.tls.ca_file = args.Get("tls-ca");
  o.tls.cert_file = args.Get("tls-cert");
  o.tls.key_file = args.Get("tls-key");
  o.tls.allow_insecure = args.Flag("allow-insecure");
  o.tls.token_file = args.Get("token-file");
  return o;
}

absl::StatusOr<OutputFormat> OutputFromArgs(const ParsedArgs& args) {
  const std::string o = args.Get("output", "table");
  if (o == "table") return OutputFormat::kTable;
  if (o == "json") return OutputFormat::kJson;
  return absl::InvalidArgumentError(absl::StrCat("unknown -o \"", o, "\": table or json"));
}

QueryClient::QueryClient(ConnectionOptions options, std::shared_ptr<grpc::Channel> channel)
    : options_(std::move(options)),
      channel_(std::move(channel)),
      stub_(v1::Query::NewStub(channel_)) {}

absl::StatusOr<std::unique_ptr<QueryClient>> QueryClient::Connect(
    const ConnectionOptions& options) {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds =
      MakeChannelCredentials(options.tls, options.target);
  if (!creds.ok()) return creds.status();
  grpc::ChannelArguments channel_args;
  // A CLI that is waiting for an outage to end should not wait long between attempts.
  channel_args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  channel_args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  channel_args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30000);
  channel_args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  // `watch` holds a stream that can be idle for hours: keep pinging while it is.
  channel_args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  channel_args.SetMaxReceiveMessageSize(64 << 20);
  if (!options.tls_name.empty()) channel_args.SetSslTargetNameOverride(options.tls_name);
  auto channel = grpc::CreateCustomChannel(options.target, *creds, channel_args);
  return std::unique_ptr<QueryClient>(new QueryClient(options, std::move(channel)));
}

absl::Status QueryClient::Explain(const grpc::Status& status) const {
  const std::string& where = options_.target;
  std::string msg = status.error_message();
  switch (status.error_code()) {
    case grpc::StatusCode::OK:
      return absl::OkStatus();
    case grpc::StatusCode::UNAVAILABLE: {
      std::string hint;
      const std::string lower = absl::AsciiStrToLower(msg);
      if (absl::StrContains(lower, "handshake") || absl::StrContains(lower, "ssl") ||
          absl::StrContains(lower, "tls") || absl::StrContains(lower, "certificate")) {
        hint = " (check --tls-ca, --tls-cert and --tls-key)";
      } else if (options_.tls.ca_file.empty()) {
        hint = " (is ringside-aggregator running there? if it uses TLS, give --tls-ca)";
      }
      return absl::UnavailableError(
          absl::StrCat("cannot reach aggregator at ", where, ": ", msg, hint));
    }
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return absl::DeadlineExceededError(
          absl::StrCat("cannot reach aggregator at ", where, ": no answer within ",
                       absl::FormatDuration(options_.timeout), " (--timeout)"));
    case grpc::StatusCode::UNIMPLEMENTED:
      return absl::UnimplementedError(absl::StrCat(
          "the aggregator at ", where,
          " does not serve the Query API (ringside.v1.Query); is it an older version? ", msg));
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED:
      return absl::PermissionDeniedError(absl::StrCat("the aggregator at ", where,
                                                      " refused this client: ", msg,
                                                      " (check --tls-cert/--tls-key or --token-file)"));
    case grpc::StatusCode::NOT_FOUND:
      return absl::NotFoundError(msg);
    case grpc::StatusCode::INVALID_ARGUMENT:
      return absl::InvalidArgumentError(absl::StrCat("the aggregator refused the query: ", msg));
    default:
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          absl::StrCat("aggregator at ", where, ": ", msg));
  }
}

namespace {

// How long a second try of a call that could not connect waits for the channel to connect: past
// its first reconnect (GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200 ms ± 20 %), with room for it.
// Every call here only reads (daemon/common/grpc_retry.h).
constexpr absl::Duration kReconnectWait = absl::Milliseconds(500);

template <typename Resp, typename Call>
absl::StatusOr<Resp> Unary(const QueryClient& client, Call call) {
  Resp resp;
  grpc::Status s = CallWithReconnect(absl::Now() + client.options().timeout, kReconnectWait,
                                     [&](grpc::ClientContext* ctx) { return call(ctx, &resp); });
  if (!s.ok()) return client.Explain(s);
  return resp;
}

}  // namespace

absl::StatusOr<v1::ListIncidentsResponse> QueryClient::ListIncidents(
    const v1::ListIncidentsRequest& req) {
  return Unary<v1::ListIncidentsResponse>(
      *this, [&](auto* ctx, auto* resp) { return stub_->ListIncidents(ctx, req, resp); });
}

absl::StatusOr<v1::Incident> QueryClient::GetIncident(uint64_t id) {
  v1::GetIncidentRequest req;
  req.set_id(id);
  absl::StatusOr<v1::Incident> r = Unary<v1::Incident>(
      *this, [&](auto* ctx, auto* resp) { return stub_->GetIncident(ctx, req, resp); });
  if (absl::IsNotFound(r.status())) {
    return absl::NotFoundError(absl::StrCat("no incident #", id, " at ", options_.target));
  }
  return r;
}

absl::StatusOr<v1::ListLinksResponse> QueryClient::ListLinks(const v1::ListLinksRequest& req) {
  return Unary<v1::ListLinksResponse>(
      *this, [&](auto* ctx, auto* resp) { return stub_->ListLinks(ctx, req, resp); });
}

absl::StatusOr<v1::NodeStatus> QueryClient::GetNode(const std::string& node) {
  v1::GetNodeRequest req;
  req.set_node(node);
  absl::StatusOr<v1::NodeStatus> r = Unary<v1::NodeStatus>(
      *this, [&](auto* ctx, auto* resp) { return stub_->GetNode(ctx, req, resp); });
  if (absl::IsNotFound(r.status())) {
    return absl::NotFoundError(absl::StrCat("the aggregator at ", options_.target,
                                            " has never heard of node \"", node, "\""));
  }
  return r;
}

absl::StatusOr<v1::TopStragglersResponse> QueryClient::TopStragglers(
    const v1::TopStragglersRequest& req) {
  return Unary<v1::TopStragglersResponse>(
      *this, [&](auto* ctx, auto* resp) { return stub_->TopStragglers(ctx, req, resp); });
}

absl::StatusOr<v1::ClusterStatus> QueryClient::GetStatus() {
  v1::GetStatusRequest req;
  return Unary<v1::ClusterStatus>(
      *this, [&](auto* ctx, auto* resp) { return stub_->GetStatus(ctx, req, resp); });
}

absl::StatusOr<v1::TopologyView> QueryClient::GetTopology(const v1::GetTopologyRequest& req) {
  return Unary<v1::TopologyView>(
      *this, [&](auto* ctx, auto* resp) { return stub_->GetTopology(ctx, req, resp); });
}

int FailCommand(CommandContext& ctx, const std::string& name, const std::string& message) {
  ctx.err << "ringside " << name << ": " << message << "\n";
  return kExitError;
}

std::optional<int> PrepareQueryCommand(const std::string& name, const std::string& usage,
                                       const std::vector<FlagSpec>& own_specs,
                                       const std::vector<std::string>& argv, CommandContext& ctx,
                                       QueryInvocation& out) {
  std::vector<FlagSpec> specs = own_specs;
  specs.insert(specs.end(), ConnectionFlagSpecs().begin(), ConnectionFlagSpecs().end());
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(argv, specs);
  if (!parsed.ok()) {
    return FailCommand(ctx, name, absl::StrCat(parsed.status().message(), " (see --help)"));
  }
  if (parsed->help) {
    ctx.out << usage << "\n" << FlagsHelp(specs) << "\n" << ConnectionHelp();
    return kExitOk;
  }
  absl::StatusOr<OutputFormat> format = OutputFromArgs(*parsed);
  if (!format.ok()) return FailCommand(ctx, name, std::string(format.status().message()));
  absl::StatusOr<ConnectionOptions> conn = ConnectionFromArgs(*parsed, std::getenv(kAggregatorEnv));
  if (!conn.ok()) return FailCommand(ctx, name, std::string(conn.status().message()));
  absl::StatusOr<std::unique_ptr<Fleet>> fleet = Fleet::Connect(*conn);
  if (!fleet.ok()) return FailCommand(ctx, name, std::string(fleet.status().message()));
  out.args = std::move(*parsed);
  out.format = *format;
  out.fleet = std::move(*fleet);
  out.client = &out.fleet->at(0);
  return std::nullopt;
}

}  // namespace ringside::daemon::ctl
