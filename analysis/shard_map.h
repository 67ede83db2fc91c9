// Which aggregator shard a node's counters and a job's collective records go to (issue #14,
// docs/scale.md). Pure logic: every agent, aggregator and CLI that holds the same map and topology
// computes the same answer, with no coordination.
//
// A shard is a name ("shard-0") and its replicas (host:port of each aggregator that runs every
// detector on the same data). Placement hashes the shard's *name*, never its addresses, so a
// replica moved to another host moves no node.
//
// - A node goes to the shard of its leaf switch when a topology knows it (the first of its leaves
//   in sorted order: the nodes of one rail group share their leaves, so a pause storm's domain and
//   both ends of a host link meet in one shard); otherwise by rendezvous (highest random weight)
//   hashing of the node name.
// - A job's collective records go to the shard of the job id (rendezvous hashing), so all ranks of
//   a job meet in one place, whatever nodes they run on.
// Rendezvous hashing moves only what must move: adding a shard to N moves about 1/(N+1) of the
// keys, all of them to the new shard; removing one moves only its own keys.
//
// The hash is FNV-1a (64-bit) of "<shard name>\n<kind>:<key>" finished with the splitmix64 mixer,
// the same on every platform and version (a test pins values).
#ifndef RINGSIDE_ANALYSIS_SHARD_MAP_H_
#define RINGSIDE_ANALYSIS_SHARD_MAP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringside::analysis {

class Topology;

struct Shard {
  std::string name;                   // what placement hashes: stable across re-addressing
  std::vector<std::string> replicas;  // host:port, one per replica (usually 2)
};

class ShardMap {
 public:
  // A file, one shard per line: its name, then its replicas separated by spaces or commas;
  // '#' starts a comment.
  //   shard-0  agg-0a.example:9472 agg-0b.example:9472
  //   shard-1  agg-1a.example:9472,agg-1b.example:9472
  // Names must be unique; a shard needs at least one replica.
  static absl::StatusOr<ShardMap> Parse(absl::string_view text);

  // Kubernetes StatefulSets: `count` shards named "shard-<k>"; each replica template names one
  // replica's address with "{shard}" standing for k, e.g.
  //   "ringside-aggregator-a-{shard}.ringside-aggregator-a.ringside.svc:9472"
  //   "ringside-aggregator-b-{shard}.ringside-aggregator-b.ringside.svc:9472"
  // (one StatefulSet per replica set, `count` pods each).
  static absl::StatusOr<ShardMap> FromStatefulSets(int count,
                                                   const std::vector<std::string>& replica_templates);

  // "statefulset:COUNT:TEMPLATE[,TEMPLATE...]" → FromStatefulSets, anything else → Parse of the
  // text (a flag's value after the caller read the file).
  static absl::StatusOr<ShardMap> FromSpec(absl::string_view spec);

  const std::vector<Shard>& shards() const { return shards_; }
  size_t size() const { return shards_.size(); }

  // Index into shards() of the shard for a node's counters (`topology` may be null), and for a
  // job's collective records. The map must not be empty.
  size_t ShardOfNode(absl::string_view node, const Topology* topology = nullptr) const;
  size_t ShardOfJob(absl::string_view job) const;

  // Index of the shard for a placement key ("leaf:<id>", "node:<name>", "job:<id>"): an agent
  // that found its leaf itself (LLDP) places by "leaf:<id>" without a topology.
  size_t ShardOfKey(absl::string_view key) const { return Place(key); }

  // The key a node is placed by: "leaf:<id>" when the topology knows its leaves, else
  // "node:<name>".
  static std::string NodePlacementKey(absl::string_view node, const Topology* topology);

  // The rendezvous weight of `key` on a shard named `shard` (exposed for tests and tools).
  static uint64_t Weight(absl::string_view shard, absl::string_view key);

 private:
  size_t Place(absl::string_view key) const;

  std::vector<Shard> shards_;
};

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_SHARD_MAP_H_
