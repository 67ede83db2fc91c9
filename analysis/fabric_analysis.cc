#include "analysis/fabric_analysis.h"

#include "absl/strings/str_cat.h"

namespace ringside::analysis {

SeriesRoute RouteOf(absl::string_view source, absl::string_view counter) {
  if (LinkDetector::Uses(source, counter)) return SeriesRoute::kLink;
  if (PauseStormDetector::Uses(source, counter)) return SeriesRoute::kPauseStorm;
  if (CongestionDetector::Uses(source, counter)) return SeriesRoute::kCongestion;
  return SeriesRoute::kNone;
}

FabricAnalysis::FabricAnalysis(FabricAnalysisOptions options, IncidentStore* store,
                               const Topology* topology)
    : options_(options),
      links_(options.link, &ports_),
      pause_storms_(options.pause_storm, topology, &ports_),
      congestion_(options.congestion, &ports_),
      stragglers_(options.straggler),
      correlator_(topology, options.correlator),
      incidents_(store, options.incidents),
      // A resolved remote incident may still explain a straggler seen within the window after.
      remote_(2 * options.correlator.window) {}

absl::Status FabricAnalysis::Start(absl::Time now) {
  absl::Status s = incidents_.Load(now);
  if (!s.ok()) return s;
  for (const Incident* inc : incidents_.Open()) {
    const Finding f = inc->AsFinding();
    if (links_.Restore(f) || pause_storms_.Restore(f) || congestion_.Restore(f)) {
      incidents_.Confirm(inc->id);
    }
  }
  return absl::OkStatus();
}

void FabricAnalysis::SetTopology(const Topology* topology) {
  pause_storms_.SetTopology(topology);
  correlator_.SetTopology(topology);
}

void FabricAnalysis::MapNetdev(absl::string_view node, absl::string_view netdev,
                               absl::string_view device, absl::string_view port) {
  ports_.MapNetdev(node, netdev, device, port);
}

SeriesBinding FabricAnalysis::Bind(absl::string_view source, absl::string_view device,
                                   absl::string_view port, absl::string_view counter,
                                   int32_t priority) {
  SeriesBinding b;
  b.route = RouteOf(source, counter);
  switch (b.route) {
    case SeriesRoute::kLink:
      b.prepared = LinkDetector::Prepare(source, counter);
      break;
    case SeriesRoute::kPauseStorm:
      b.prepared = PauseStormDetector::Prepare(source, counter, priority);
      break;
    case SeriesRoute::kCongestion:
      b.prepared = CongestionDetector::Prepare(source, counter, priority);
      break;
    case SeriesRoute::kNone:
      return b;
  }
  // Numbered by class rather than source, so a port's PMA counters and its state (or a netdev's
  // statistics and its ethtool counters) share a number: same number, same canonical port.
  const std::string key =
      absl::StrCat(static_cast<int>(SourceClass(source)), "\x1f", device, "\x1f", port);
  auto it = port_numbers_.find(key);
  if (it != port_numbers_.end()) {
    b.port = it->second;
  } else if (port_numbers_.size() < kMaxPortNumbers) {
    b.port = static_cast<uint32_t>(port_numbers_.size() + 1);
    port_numbers_.emplace(key, b.port);
  }
  return b;
}

void FabricAnalysis::OnCounter(const CounterStep& step) {
  OnCounter(step, RouteOf(step.source, step.counter));
}

void FabricAnalysis::OnCounter(const CounterStep& step, SeriesRoute route) {
  switch (route) {
    case SeriesRoute::kLink:
      links_.ObserveCounter(step, findings_);
      break;
    case SeriesRoute::kPauseStorm:
      pause_storms_.ObserveCounter(step, findings_);
      break;
    case SeriesRoute::kCongestion:
      congestion_.ObserveCounter(step, findings_);
      break;
    case SeriesRoute::kNone:
      break;
  }
}

void FabricAnalysis::OnState(const StateSample& sample) { links_.ObserveState(sample, findings_); }

void FabricAnalysis::OnEvent(const LinkEvent& event) { links_.ObserveEvent(event, findings_); }

void FabricAnalysis::OnCollective(const CollectiveObservation& obs) {
  correlator_.ObserveCollective(obs);
  stragglers_.Observe(obs, findings_);
}

absl::Status FabricAnalysis::Flush(absl::Time now, std::vector<IncidentChange>* changes) {
  links_.Advance(now, findings_);
  pause_storms_.Advance(now, findings_);
  congestion_.Advance(now, findings_);
  stragglers_.Expire(now);
  correlator_.Expire(now);
  remote_.Expire(now);
  absl::Status first = incidents_.Apply(findings_, changes);
  findings_.clear();
  if (absl::Status s = incidents_.Advance(now, changes); !s.ok() && first.ok()) first = s;
  if (absl::Status s = correlator_.Correlate(incidents_, now, changes, &remote_);
      !s.ok() && first.ok()) {
    first = s;
  }
  return first;
}

}  // namespace ringside::analysis
