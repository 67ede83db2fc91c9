// The detectors' read-only views (analysis/fabric_views.h): LinkDetector::Views,
// StragglerDetector::Ranks and FabricAnalysis::Links / Stragglers, kept apart from the detection
// logic they only read.
#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "analysis/fabric_analysis.h"
#include "analysis/link_detector.h"
#include "analysis/link_detector_internal.h"
#include "analysis/straggler_detector.h"
#include "analysis/straggler_where.h"

namespace ringside::analysis {
namespace {

absl::string_view SourceOf(PortClass cls) {
  switch (cls) {
    case PortClass::kRdma:
      return "infiniband";
    case PortClass::kNetdev:
      return "netdev";
    case PortClass::kNvlink:
      return "nvlink";
  }
  return "unknown";
}

double MedianOf(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

LinkView LinkRef::ToView() const {
  LinkView v;
  v.node = std::string(node);
  v.source = std::string(source);
  v.device = std::string(device);
  v.port = std::string(port);
  v.state = state;
  v.flaps_in_window = flaps_in_window;
  v.last_change = last_change;
  v.last_seen = last_seen;
  return v;
}

LinkRef LinkDetector::RefOf(const Link& l, absl::Time now) const {
  LinkRef r;
  r.node = l.node;
  r.source = SourceOf(l.id.cls);
  r.device = l.id.device;
  r.port = l.id.port;
  r.state = l.state;
  r.flaps_in_window = static_cast<uint32_t>(CompletedInWindow(l, now));
  r.last_change = l.last_transition;
  r.last_seen = l.last_input;
  r.record = &l;
  return r;
}

void LinkDetector::VisitLinks(absl::Time now, absl::FunctionRef<void(const LinkRef&)> fn) const {
  for (const auto& [key, link] : links_) fn(RefOf(*link, now));
}

LinkView LinkDetector::ViewOf(const void* record, absl::Time now) const {
  return RefOf(*static_cast<const Link*>(record), now).ToView();
}

std::vector<LinkView> LinkDetector::Views(absl::Time now) const {
  std::vector<LinkView> out;
  out.reserve(links_.size());
  VisitLinks(now, [&out](const LinkRef& r) { out.push_back(r.ToView()); });
  return out;
}

std::vector<RankView> StragglerDetector::Ranks(absl::string_view job) const {
  std::vector<RankView> out;
  for (const auto& [key, comm] : comms_) {
    if (!job.empty() && comm.job != job) continue;
    const uint32_t nranks = static_cast<uint32_t>(comm.workers.size());
    // Per rank, the best function so far: (late count, window size, its name).
    struct Best {
      int late = -1;
      int n = 0;
      const std::string* function = nullptr;
    };
    std::vector<Best> best(nranks);
    // On a tie, the function that flagged the rank, else one that flagged any rank of the
    // communicator (where the wait shows), else the longest window.
    std::set<std::string> flagging;
    for (const auto& [rank, flag] : comm.flagged) flagging.insert(flag.function);
    for (const auto& [function, window] : comm.windows) {
      if (window.instances.empty()) continue;
      const int n = static_cast<int>(window.instances.size());
      for (uint32_t r = 0; r < nranks; ++r) {
        Best& b = best[r];
        const int late = window.CountOf(static_cast<int32_t>(r));
        auto flag = comm.flagged.find(static_cast<int32_t>(r));
        // (comm.flagged captured by name: clang 14 cannot capture a structured binding.)
        const auto preferred = [&, &flagged = comm.flagged](const std::string& f) {
          return flag != flagged.end() ? f == flag->second.function : flagging.count(f) > 0;
        };
        const bool better =
            b.function == nullptr ||
            static_cast<int64_t>(late) * b.n > static_cast<int64_t>(b.late) * n ||
            (static_cast<int64_t>(late) * b.n == static_cast<int64_t>(b.late) * n &&
             (preferred(function) || (!preferred(*b.function) && n > b.n)));
        if (better) b = Best{late, n, &function};
      }
    }
    for (uint32_t r = 0; r < nranks; ++r) {
      const Best& b = best[r];
      if (b.function == nullptr) continue;
      const Worker& w = comm.workers[r];
      RankView v;
      v.job = comm.job;
      v.rank = w.global_rank >= 0 ? w.global_rank : static_cast<int64_t>(r);
      v.node = w.host;
      v.comm = comm.name;
      v.pod = w.pod;
      v.pod_namespace = w.pod_namespace;
      v.instances = static_cast<uint32_t>(b.n);
      v.score = b.n > 0 ? static_cast<double>(b.late) / b.n : 0;
      std::vector<double> margins;
      double host = 0, split = 0;
      int split_count = 0;
      if (b.late > 0) {
        for (const Judged& j : comm.windows.at(*b.function).instances) {
          for (const Late& l : j.late) {
            if (l.rank != static_cast<int32_t>(r)) continue;
            if (l.host_ns >= 0) {
              host += static_cast<double>(l.host_ns);
              split += static_cast<double>(l.host_ns + l.gpu_ns);
              ++split_count;
            }
            if (j.span_ns <= 0) continue;
            margins.push_back(static_cast<double>(l.lateness_ns) / static_cast<double>(j.span_ns));
          }
        }
      }
      v.margin = MedianOf(std::move(margins));
      if (split_count > 0 && 2 * split_count >= b.late && split > 0) {
        v.where = StragglerWhere({{"host_share", host / split}});
      }
      v.gpu_sharers = w.gpu_sharers;
      auto wait = comm.wait.find(*b.function);
      if (wait != comm.wait.end() && r < wait->second.size() && wait->second[r] >= 0) {
        v.wait_fraction = wait->second[r];
      }
      out.push_back(std::move(v));
    }
  }
  return out;
}

std::vector<LinkView> FabricAnalysis::Links(absl::Time now) const { return links_.Views(now); }

void FabricAnalysis::VisitLinks(absl::Time now, absl::FunctionRef<void(const LinkRef&)> fn) const {
  links_.VisitLinks(now, fn);
}

LinkView FabricAnalysis::LinkViewOf(const void* record, absl::Time now) const {
  return links_.ViewOf(record, now);
}

std::vector<RankView> FabricAnalysis::Stragglers(absl::string_view job) const {
  return stragglers_.Ranks(job);
}

}  // namespace ringside::analysis
