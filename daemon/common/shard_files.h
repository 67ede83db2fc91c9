// Reading the shard map and the topology named by flags (--shard-map, --topology) into the pure
// structures of analysis/ (shard_map.h, topology.h), with errors that name the file.
#ifndef RINGSIDE_DAEMON_COMMON_SHARD_FILES_H_
#define RINGSIDE_DAEMON_COMMON_SHARD_FILES_H_

#include <string>

#include "absl/status/statusor.h"
#include "analysis/shard_map.h"
#include "analysis/topology.h"

namespace ringside::daemon {

// "statefulset:COUNT:TEMPLATE[,TEMPLATE]" as it is; anything else is the path of a shard file.
absl::StatusOr<analysis::ShardMap> LoadShardMap(const std::string& spec);

// ibnetdiscover output or "node switch" lines.
absl::StatusOr<analysis::Topology> LoadTopology(const std::string& path);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_COMMON_SHARD_FILES_H_
