#include "daemon/aggregator/shards/peer_incidents.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/aggregator/query/query_convert.h"
#include "daemon/common/grpc_retry.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "ringside/v1/query.grpc.pb.h"

namespace ringside::daemon {

std::vector<analysis::Incident> FetchPeerOpenIncidents(const PeerFetchOptions& options) {
  auto log = [&](const std::string& m) {
    if (options.log) options.log(m);
  };
  std::vector<analysis::Incident> out;
  std::set<std::string> keys;
  for (const std::string& peer : options.peers) {
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds =
        MakeChannelCredentials(options.tls, peer);
    if (!creds.ok()) {
      log(absl::StrCat("peer ", peer, ": ", creds.status().ToString()));
      continue;
    }
    // A reconnect 200 ms after a failed connect, not gRPC's default 1 s: see below.
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
    std::unique_ptr<v1::Query::Stub> stub =
        v1::Query::NewStub(grpc::CreateCustomChannel(peer, *creds, args));
    v1::ListIncidentsRequest req;
    req.set_open_only(true);
    req.set_limit(10000);
    v1::ListIncidentsResponse resp;
    // A peer that is down is not waited for long (fail-fast), but a connect that gRPC 1.51 fails
    // spuriously gets a second try (daemon/common/grpc_retry.h) past the channel's first
    // reconnect (200 ms ± 20 %).
    const grpc::Status st = CallWithReconnect(
        absl::Now() + options.timeout, absl::Milliseconds(500),
        [&](grpc::ClientContext* ctx) { return stub->ListIncidents(ctx, req, &resp); });
    if (!st.ok()) {
      log(absl::StrCat("peer ", peer, " not reachable (", st.error_message(),
                       "): starting without its open incidents"));
      continue;
    }
    size_t taken = 0;
    for (const v1::Incident& p : resp.incidents()) {
      absl::StatusOr<analysis::Incident> inc = FromProto(p);
      if (!inc.ok() || !inc->open()) continue;
      if (!keys.insert(analysis::StableIncidentKey(*inc)).second) continue;
      out.push_back(*std::move(inc));
      ++taken;
    }
    log(absl::StrCat("peer ", peer, ": ", resp.incidents_size(), " open incidents (", taken,
                     " new)"));
  }
  return out;
}

absl::StatusOr<size_t> AdoptIncidents(analysis::IncidentStore& store,
                                      const std::vector<analysis::Incident>& incidents) {
  if (incidents.empty()) return 0;
  absl::StatusOr<std::vector<analysis::Incident>> open = store.LoadOpen();
  if (!open.ok()) return open.status();
  std::set<std::string> open_keys;
  for (const analysis::Incident& i : *open) open_keys.insert(i.key);
  absl::StatusOr<uint64_t> next = store.NextId();
  if (!next.ok()) return next.status();
  uint64_t id = *next;
  size_t adopted = 0;
  for (const analysis::Incident& peer : incidents) {
    analysis::Incident inc = peer;
    inc.key = analysis::FindingKey(inc.AsFinding());
    if (!open_keys.insert(inc.key).second) continue;  // already open here
    inc.id = id++;
    inc.causes.clear();
    inc.affected.clear();
    inc.revision = 1;
    inc.resolved.reset();
    if (absl::Status s = store.Put(inc); !s.ok()) return s;
    ++adopted;
  }
  return adopted;
}

}  // namespace ringside::daemon
