// A replica that starts (restarted, upgraded, or replaced with an empty state dir) takes the
// incidents open on its peers — the other replicas of its shard — before it alerts (issue #14,
// docs/scale.md). They carry the same stable keys (analysis::StableIncidentKey), so the alerts it
// sends for them are the ones the peers already sent, and Alertmanager pages nobody again; its
// detectors take them over as after a restart (IncidentManager::Load, Restore, Confirm).
#ifndef RINGSIDE_DAEMON_AGGREGATOR_SHARDS_PEER_INCIDENTS_H_
#define RINGSIDE_DAEMON_AGGREGATOR_SHARDS_PEER_INCIDENTS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "analysis/incident_store.h"
#include "analysis/incidents.h"
#include "daemon/common/tls.h"

namespace ringside::daemon {

struct PeerFetchOptions {
  std::vector<std::string> peers;  // host:port of each other replica's gRPC (Query API)
  TlsOptions tls;                  // this aggregator's own certificate as the client's
  absl::Duration timeout = absl::Seconds(5);  // per peer
  std::function<void(const std::string&)> log;
};

// The incidents open on any reachable peer, one per stable key (the first peer's copy wins).
// Unreachable peers are logged and skipped: the first replica of a shard to start has none.
std::vector<analysis::Incident> FetchPeerOpenIncidents(const PeerFetchOptions& options);

// Writes the peers' open incidents into `store` as open incidents of this aggregator (new local
// ids, no causes or blast radius: the correlator recomputes those), skipping any whose finding is
// already open here. Call before the analysis loads the store. Returns how many were adopted.
absl::StatusOr<size_t> AdoptIncidents(analysis::IncidentStore& store,
                                      const std::vector<analysis::Incident>& incidents);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_SHARDS_PEER_INCIDENTS_H_
