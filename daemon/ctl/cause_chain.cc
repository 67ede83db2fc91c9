#include "daemon/ctl/cause_chain.h"

#include <map>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "daemon/ctl/incident_text.h"

namespace ringside::daemon::ctl {
namespace {

class Resolver {
 public:
  Resolver(const IncidentFetcher& fetch, ChainLimits limits) : fetch_(fetch), limits_(limits) {}

  void Walk(const v1::Incident& from, std::set<uint64_t>& on_path, CausePath& path,
            std::vector<CausePath>& out) {
    for (const v1::CauseLink& link : from.causes()) {
      if (static_cast<int>(out.size()) >= limits_.max_paths) return;
      ChainStep step;
      step.link = link;
      bool follow = false;
      const uint64_t id = link.incident_id();
      if (id == 0) {
        // A host cause: nothing behind it.
      } else if (on_path.count(id) > 0) {
        step.note = "cycle";
      } else if (static_cast<int>(path.size()) + 1 >= limits_.max_depth) {
        step.note = "depth limit";
      } else {
        absl::StatusOr<v1::Incident> got = Fetch(id);
        if (got.ok()) {
          step.incident = *got;
          follow = got->causes_size() > 0;
        } else if (absl::IsNotFound(got.status())) {
          step.note = "not found";
        } else {
          step.note = std::string(got.status().message());
        }
      }
      path.push_back(step);
      if (follow) {
        on_path.insert(id);
        Walk(*path.back().incident, on_path, path, out);
        on_path.erase(id);
      } else {
        out.push_back(path);
      }
      path.pop_back();
    }
  }

 private:
  absl::StatusOr<v1::Incident> Fetch(uint64_t id) {
    auto it = cache_.find(id);
    if (it != cache_.end()) return it->second;
    if (fetches_ >= limits_.max_fetches) {
      return absl::ResourceExhaustedError("too many causes to follow");
    }
    ++fetches_;
    absl::StatusOr<v1::Incident> got = fetch_(id);
    cache_.emplace(id, got);
    return got;
  }

  const IncidentFetcher& fetch_;
  ChainLimits limits_;
  int fetches_ = 0;
  std::map<uint64_t, absl::StatusOr<v1::Incident>> cache_;
};

}  // namespace

std::vector<CausePath> ResolveCauseChains(const v1::Incident& root, const IncidentFetcher& fetch,
                                          ChainLimits limits) {
  std::vector<CausePath> out;
  std::set<uint64_t> on_path;
  if (root.id() != 0) on_path.insert(root.id());
  CausePath path;
  Resolver(fetch, limits).Walk(root, on_path, path, out);
  return out;
}

std::string StepText(const ChainStep& step) {
  std::string text;
  if (step.incident.has_value()) {
    text = Headline(*step.incident);
  } else {
    const std::string kind = step.link.kind().empty() ? "cause" : step.link.kind();
    text =
        step.link.entity().empty() ? kind : absl::StrCat(kind, " ", EntityText(step.link.entity()));
  }
  const uint64_t id = step.link.incident_id();
  if (id != 0 && step.note.empty()) {
    absl::StrAppend(&text, " (#", id, ")");
  } else if (id != 0) {
    absl::StrAppend(&text, " (#", id, ", ", step.note, ")");
  } else if (!step.link.shard().empty()) {
    // Raised by another shard's aggregators (cross-shard attribution): named by its stable key,
    // which `ringside incident KEY` across the fleet finds.
    absl::StrAppend(&text, " (on ", step.link.shard(), ", key ", step.link.key(),
                    step.note.empty() ? "" : ", ", step.note, ")");
  } else if (!step.note.empty()) {
    absl::StrAppend(&text, " (", step.note, ")");
  }
  return text;
}

std::string ChainText(const v1::Incident& root, const CausePath& path) {
  std::string text = Headline(root);
  for (const ChainStep& step : path) absl::StrAppend(&text, " ← ", StepText(step));
  return text;
}

}  // namespace ringside::daemon::ctl
