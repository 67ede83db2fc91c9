#include "daemon/aggregator/query/incident_queries.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "analysis/incident_store.h"
#include "daemon/aggregator/analysis_host.h"

namespace ringside::daemon {
namespace {

constexpr analysis::IncidentKind kKinds[] = {
    analysis::IncidentKind::kLinkDown,     analysis::IncidentKind::kLinkFlapping,
    analysis::IncidentKind::kLinkDegraded, analysis::IncidentKind::kPauseStorm,
    analysis::IncidentKind::kCongestion,   analysis::IncidentKind::kStraggler,
    analysis::IncidentKind::kJobSlowdown,  analysis::IncidentKind::kGpuThrottled,
    analysis::IncidentKind::kGpuXid,       analysis::IncidentKind::kGpuMemoryError,
    analysis::IncidentKind::kGpuPcieDegraded,
};

size_t EffectiveLimit(size_t limit) {
  if (limit == 0) return 100;
  return std::min(limit, kMaxIncidentLimit);
}

HttpResponse JsonError(int status, absl::string_view message) {
  HttpResponse r;
  r.status = status;
  r.content_type = "application/json";
  r.body = absl::StrCat("{\"error\":", analysis::JsonQuote(message), "}\n");
  return r;
}

}  // namespace

absl::StatusOr<std::optional<analysis::IncidentKind>> ParseKindFilter(absl::string_view kind) {
  if (kind.empty()) return std::optional<analysis::IncidentKind>();
  std::optional<analysis::IncidentKind> k = analysis::ParseIncidentKind(kind);
  if (k) return k;
  std::vector<std::string> names;
  for (analysis::IncidentKind x : kKinds) names.emplace_back(analysis::IncidentKindName(x));
  return absl::InvalidArgumentError(
      absl::StrCat("unknown incident kind \"", kind, "\"; one of ", absl::StrJoin(names, ", ")));
}

bool IncidentMatches(const IncidentFilter& f, const analysis::Incident& inc) {
  if (f.open_only && !inc.open()) return false;
  if (f.kind && inc.kind != *f.kind) return false;
  if (inc.updated < f.since) return false;
  if (!f.node.empty()) {
    auto it = inc.entity.find("node");
    if (it == inc.entity.end() || it->second != f.node) return false;
  }
  if (!f.job.empty()) {
    auto it = inc.entity.find("job");
    bool hit = it != inc.entity.end() && it->second == f.job;
    for (const analysis::AffectedJob& a : inc.affected) hit |= a.job == f.job;
    if (!hit) return false;
  }
  return true;
}

absl::StatusOr<std::vector<analysis::Incident>> QueryIncidents(const AnalysisHost* host,
                                                               const IncidentFilter& filter) {
  const size_t limit = EffectiveLimit(filter.limit);
  std::map<uint64_t, analysis::Incident, std::greater<>> found;  // newest first
  if (host == nullptr) return std::vector<analysis::Incident>{};
  host->WithAnalysis([&](const analysis::FabricAnalysis& a) {
    for (const analysis::Incident* inc : a.incidents().Open()) {
      if (IncidentMatches(filter, *inc)) found.emplace(inc->id, *inc);
    }
    if (filter.open_only) return;
    for (const analysis::Incident* inc : a.incidents().RecentlyResolved()) {
      if (IncidentMatches(filter, *inc)) found.emplace(inc->id, *inc);
    }
  });
  analysis::IncidentStore* store = host->store();
  if (!filter.open_only && store != nullptr) {
    analysis::IncidentQuery q;
    q.kind = filter.kind;
    q.since = filter.since;
    // The store filters by kind and time only: with a node or job filter, read further back.
    const bool narrowed = !filter.node.empty() || !filter.job.empty();
    q.limit = narrowed ? std::max<size_t>(limit * 10, 1000) : limit;
    absl::StatusOr<std::vector<analysis::Incident>> stored = store->List(q);
    if (!stored.ok()) {
      return absl::UnavailableError(absl::StrCat("incident store: ", stored.status().message()));
    }
    for (analysis::Incident& inc : *stored) {
      if (IncidentMatches(filter, inc)) found.emplace(inc.id, std::move(inc));  // memory wins
    }
  }
  std::vector<analysis::Incident> out;
  for (auto& [id, inc] : found) {
    if (out.size() >= limit) break;
    out.push_back(std::move(inc));
  }
  return out;
}

absl::StatusOr<analysis::Incident> FindIncident(const AnalysisHost* host, uint64_t id) {
  std::optional<analysis::Incident> hit;
  if (host != nullptr) {
    host->WithAnalysis([&](const analysis::FabricAnalysis& a) {
      if (const analysis::Incident* inc = a.incidents().Get(id)) hit = *inc;
    });
    if (!hit && host->store() != nullptr) {
      absl::StatusOr<std::optional<analysis::Incident>> stored = host->store()->Get(id);
      if (!stored.ok()) {
        return absl::UnavailableError(absl::StrCat("incident store: ", stored.status().message()));
      }
      hit = std::move(*stored);
    }
  }
  if (!hit) return absl::NotFoundError(absl::StrCat("no incident ", id));
  return *std::move(hit);
}

HttpResponse IncidentsHttp(const AnalysisHost* host, const HttpRequest& request) {
  IncidentFilter f;
  const auto param = [&](const char* name) -> const std::string* {
    auto it = request.query.find(name);
    return it == request.query.end() ? nullptr : &it->second;
  };
  if (const std::string* open = param("open")) {
    const std::string v = absl::AsciiStrToLower(*open);
    if (v == "1" || v == "true") {
      f.open_only = true;
    } else if (!(v.empty() || v == "0" || v == "false")) {
      return JsonError(400, "open must be 1 or 0");
    }
  }
  if (const std::string* kind = param("kind")) {
    absl::StatusOr<std::optional<analysis::IncidentKind>> k = ParseKindFilter(*kind);
    if (!k.ok()) return JsonError(400, k.status().message());
    f.kind = *k;
  }
  if (const std::string* node = param("node")) f.node = *node;
  if (const std::string* job = param("job")) f.job = *job;
  if (const std::string* since = param("since"); since != nullptr && !since->empty()) {
    double s = 0;
    if (!absl::SimpleAtod(*since, &s) || !std::isfinite(s) || s < 0 || s > 1e11) {
      return JsonError(400, "since must be Unix seconds");
    }
    f.since = absl::FromUnixNanos(static_cast<int64_t>(s * 1e9));
  }
  if (const std::string* limit = param("limit"); limit != nullptr && !limit->empty()) {
    uint64_t l = 0;
    if (!absl::SimpleAtoi(*limit, &l)) return JsonError(400, "limit must be a count");
    f.limit = static_cast<size_t>(std::min<uint64_t>(l, kMaxIncidentLimit));
  }
  absl::StatusOr<std::vector<analysis::Incident>> found = QueryIncidents(host, f);
  if (!found.ok()) return JsonError(503, found.status().message());
  HttpResponse r;
  r.content_type = "application/json";
  r.body = "[";
  for (size_t i = 0; i < found->size(); ++i) {
    if (i > 0) r.body += ",";
    r.body += analysis::IncidentJson((*found)[i]);
  }
  r.body += "]\n";
  return r;
}

}  // namespace ringside::daemon
