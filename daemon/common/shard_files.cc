#include "daemon/common/shard_files.h"

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ringside::daemon {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("error reading ", path));
  return text.str();
}

absl::Status InFile(const absl::Status& s, const std::string& path) {
  return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
}

}  // namespace

absl::StatusOr<analysis::ShardMap> LoadShardMap(const std::string& spec) {
  if (absl::StartsWith(spec, "statefulset:")) return analysis::ShardMap::FromSpec(spec);
  absl::StatusOr<std::string> text = ReadFile(spec);
  if (!text.ok()) return text.status();
  absl::StatusOr<analysis::ShardMap> m = analysis::ShardMap::Parse(*text);
  if (!m.ok()) return InFile(m.status(), spec);
  return m;
}

absl::StatusOr<analysis::Topology> LoadTopology(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<analysis::Topology> t = analysis::Topology::Parse(*text);
  if (!t.ok()) return InFile(t.status(), path);
  return t;
}

}  // namespace ringside::daemon
