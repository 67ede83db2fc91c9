#include "analysis/shard_map.h"

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "analysis/topology.h"

namespace ringside::analysis {
namespace {

uint64_t Fnv1a(uint64_t h, absl::string_view bytes) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

uint64_t SplitMix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

absl::Status CheckShards(const std::vector<Shard>& shards) {
  if (shards.empty()) return absl::InvalidArgumentError("shard map: no shard");
  std::set<std::string> names;
  for (const Shard& s : shards) {
    if (!names.insert(s.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("shard map: shard \"", s.name, "\" twice"));
    }
    if (s.replicas.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("shard map: shard \"", s.name, "\" has no replica"));
    }
    for (const std::string& r : s.replicas) {
      const size_t colon = r.rfind(':');
      int port = 0;
      if (colon == std::string::npos || colon == 0 ||
          !absl::SimpleAtoi(absl::string_view(r).substr(colon + 1), &port) || port <= 0 ||
          port > 65535) {
        return absl::InvalidArgumentError(absl::StrCat("shard map: shard \"", s.name,
                                                       "\": replica \"", r,
                                                       "\" is not host:port"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

uint64_t ShardMap::Weight(absl::string_view shard, absl::string_view key) {
  uint64_t h = Fnv1a(0xcbf29ce484222325ULL, shard);
  h = Fnv1a(h, "\n");
  return SplitMix64(Fnv1a(h, key));
}

absl::StatusOr<ShardMap> ShardMap::Parse(absl::string_view text) {
  ShardMap m;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    if (size_t hash = line.find('#'); hash != absl::string_view::npos) line = line.substr(0, hash);
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t,\r"), absl::SkipEmpty());
    if (fields.empty()) continue;
    if (fields.size() < 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shard map line ", line_no, ": \"", absl::StripAsciiWhitespace(line),
          "\" names no replica (want: NAME HOST:PORT [HOST:PORT...])"));
    }
    Shard s;
    s.name = std::string(fields[0]);
    for (size_t i = 1; i < fields.size(); ++i) s.replicas.emplace_back(fields[i]);
    m.shards_.push_back(std::move(s));
  }
  if (absl::Status st = CheckShards(m.shards_); !st.ok()) return st;
  return m;
}

absl::StatusOr<ShardMap> ShardMap::FromStatefulSets(
    int count, const std::vector<std::string>& replica_templates) {
  if (count <= 0) return absl::InvalidArgumentError("shard map: the shard count must be positive");
  if (replica_templates.empty()) {
    return absl::InvalidArgumentError("shard map: no replica template");
  }
  ShardMap m;
  for (int k = 0; k < count; ++k) {
    Shard s;
    s.name = absl::StrCat("shard-", k);
    for (const std::string& t : replica_templates) {
      if (t.find("{shard}") == std::string::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("shard map: replica template \"", t, "\" has no {shard}"));
      }
      s.replicas.push_back(absl::StrReplaceAll(t, {{"{shard}", absl::StrCat(k)}}));
    }
    m.shards_.push_back(std::move(s));
  }
  if (absl::Status st = CheckShards(m.shards_); !st.ok()) return st;
  return m;
}

absl::StatusOr<ShardMap> ShardMap::FromSpec(absl::string_view spec) {
  if (!absl::ConsumePrefix(&spec, "statefulset:")) return Parse(spec);
  std::vector<std::string> parts = absl::StrSplit(spec, absl::MaxSplits(':', 1));
  int count = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &count)) {
    return absl::InvalidArgumentError(
        "shard map: want statefulset:COUNT:TEMPLATE[,TEMPLATE...], e.g. "
        "statefulset:4:ringside-aggregator-a-{shard}.ringside-aggregator-a:9472");
  }
  return FromStatefulSets(count, absl::StrSplit(parts[1], ',', absl::SkipEmpty()));
}

std::string ShardMap::NodePlacementKey(absl::string_view node, const Topology* topology) {
  if (topology != nullptr) {
    std::vector<std::string> leaves = topology->LeavesOf(node);
    if (!leaves.empty()) return absl::StrCat("leaf:", leaves.front());
  }
  return absl::StrCat("node:", node);
}

size_t ShardMap::Place(absl::string_view key) const {
  size_t best = 0;
  uint64_t best_weight = 0;
  for (size_t i = 0; i < shards_.size(); ++i) {
    const uint64_t w = Weight(shards_[i].name, key);
    // Ties (astronomically rare) go to the smaller name, so every caller agrees.
    if (i == 0 || w > best_weight || (w == best_weight && shards_[i].name < shards_[best].name)) {
      best = i;
      best_weight = w;
    }
  }
  return best;
}

size_t ShardMap::ShardOfNode(absl::string_view node, const Topology* topology) const {
  return Place(NodePlacementKey(node, topology));
}

size_t ShardMap::ShardOfJob(absl::string_view job) const {
  return Place(absl::StrCat("job:", job));
}

}  // namespace ringside::analysis
