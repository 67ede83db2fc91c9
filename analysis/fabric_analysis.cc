#include "analysis/fabric_analysis.h"

#include <set>

#include "absl/strings/str_cat.h"

namespace ringside::analysis {

SeriesRoute RouteOf(absl::string_view source, absl::string_view counter) {
  if (LinkDetector::Uses(source, counter)) return SeriesRoute::kLink;
  if (PauseStormDetector::Uses(source, counter)) return SeriesRoute::kPauseStorm;
  if (CongestionDetector::Uses(source, counter)) return SeriesRoute::kCongestion;
  if (GpuDetector::Uses(source, counter)) return SeriesRoute::kGpu;
  if (HostSignals::Uses(source, counter)) return SeriesRoute::kHost;
  return SeriesRoute::kNone;
}

FabricAnalysis::FabricAnalysis(FabricAnalysisOptions options, IncidentStore* store,
                               const Topology* topology)
    : options_(options),
      links_(options.link, &ports_),
      pause_storms_(options.pause_storm, topology, &ports_),
      congestion_(options.congestion, &ports_),
      stragglers_(options.straggler),
      gpus_(options.gpu, &gpu_directory_),
      host_(options.host),
      correlator_(topology, options.correlator),
      incidents_(store, options.incidents),
      // A resolved remote incident may still explain a straggler seen within the window after.
      remote_(2 * options.correlator.window) {
  correlator_.SetCauseContext(&gpu_directory_, &host_, &gpus_);
}

absl::Status FabricAnalysis::Start(absl::Time now) {
  absl::Status s = incidents_.Load(now);
  if (!s.ok()) return s;
  for (const Incident* inc : incidents_.Open()) {
    const Finding f = inc->AsFinding();
    if (links_.Restore(f) || pause_storms_.Restore(f) || congestion_.Restore(f) ||
        gpus_.Restore(f)) {
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
    case SeriesRoute::kGpu:
    case SeriesRoute::kHost:
    case SeriesRoute::kNone:
      return b;  // no port numbers: these detectors key by node and device themselves
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
    case SeriesRoute::kGpu:
      gpus_.ObserveCounter(step, findings_);
      break;
    case SeriesRoute::kHost:
      host_.ObserveCounter(step);
      break;
    case SeriesRoute::kNone:
      break;
  }
}

void FabricAnalysis::OnState(const StateSample& sample) {
  if (sample.source == "gpu") {
    gpus_.ObserveState(sample, findings_);
    return;
  }
  links_.ObserveState(sample, findings_);
}

void FabricAnalysis::OnEvent(const LinkEvent& event) {
  if (GpuDetector::UsesEvent(event.source)) {
    gpus_.ObserveXid(event.node, event.device, event.time, event.detail, findings_);
    return;
  }
  links_.ObserveEvent(event, findings_);
}

void FabricAnalysis::OnCollective(const CollectiveObservation& obs) {
  correlator_.ObserveCollective(obs);
  stragglers_.Observe(obs, findings_);
}

absl::Status FabricAnalysis::Flush(absl::Time now, std::vector<IncidentChange>* changes) {
  links_.Advance(now, findings_);
  pause_storms_.Advance(now, findings_);
  congestion_.Advance(now, findings_);
  gpus_.Advance(now, findings_);
  host_.Expire(now - std::max(absl::Minutes(10), 2 * options_.host.window));
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

absl::Status FabricAnalysis::ApplyFindings(absl::Time now, std::vector<IncidentChange>* changes) {
  if (findings_.empty()) return absl::OkStatus();
  std::vector<IncidentChange> applied;
  absl::Status first = incidents_.Apply(findings_, &applied);
  findings_.clear();
  if (absl::Status s = CorrelateChanged(applied, now, &applied); !s.ok() && first.ok()) first = s;
  if (changes != nullptr) {
    changes->insert(changes->end(), std::make_move_iterator(applied.begin()),
                    std::make_move_iterator(applied.end()));
  }
  return first;
}

absl::Status FabricAnalysis::CorrelateChanged(const std::vector<IncidentChange>& changed,
                                              absl::Time now,
                                              std::vector<IncidentChange>* changes) {
  std::set<uint64_t> faults, symptoms;
  bool fabric_changed = false, symptom_changed = false;
  for (const IncidentChange& c : changed) {
    if (IsFabricKind(c.incident.kind) || IsGpuKind(c.incident.kind)) {
      fabric_changed = true;  // a candidate cause came or went
      if (c.incident.open() && IsFabricKind(c.incident.kind)) faults.insert(c.incident.id);
    } else {
      symptom_changed = true;
      if (c.incident.open()) symptoms.insert(c.incident.id);
    }
  }
  std::vector<const Incident*> fabric;
  for (const Incident* inc : incidents_.Open()) {
    if (IsGpuKind(inc->kind)) {
      fabric.push_back(inc);  // candidate cause of a straggler on its GPU
    } else if (IsFabricKind(inc->kind)) {
      fabric.push_back(inc);
      // A straggler or slowdown that came names ranks: the faults' blast radius, as of it.
      if (symptom_changed) faults.insert(inc->id);
    } else if (fabric_changed) {
      symptoms.insert(inc->id);  // a fault that came or went may be (or have been) its cause
    }
  }
  if (symptoms.empty() && faults.empty()) return absl::OkStatus();
  for (const Incident* inc : incidents_.RecentlyResolved()) {
    if (IsFabricKind(inc->kind) || IsGpuKind(inc->kind)) fabric.push_back(inc);
  }
  // Other shards' fabric incidents are causes here too, and their stragglers name our faults'
  // jobs (as Correlator::Correlate does with them: the two paths must agree, or every flush
  // would undo what the last apply wrote).
  absl::flat_hash_map<const Incident*, std::string> remote_shard;
  for (const RemoteIncidents::Entry* e : remote_.Fabric()) {
    fabric.push_back(&e->incident);
    remote_shard.emplace(&e->incident, e->shard);
  }
  // Compute first, then write (as Correlator::Correlate).
  std::vector<std::pair<uint64_t, std::vector<CauseLink>>> causes;
  for (uint64_t id : symptoms) {
    if (const Incident* s = incidents_.Get(id); s != nullptr && s->open()) {
      std::vector<CauseLink> c =
          correlator_.CausesOf(*s, fabric, remote_shard.empty() ? nullptr : &remote_shard);
      Correlator::KeepSameChoice(s->causes, c);
      causes.emplace_back(id, std::move(c));
    }
  }
  std::vector<std::pair<uint64_t, std::vector<AffectedJob>>> radius;
  for (uint64_t id : faults) {
    if (const Incident* f = incidents_.Get(id); f != nullptr && f->open()) {
      std::vector<AffectedJob> r = correlator_.BlastRadius(*f, now);
      MergeAffected(r, remote_.AffectedBy(StableIncidentKey(*f)));
      radius.emplace_back(id, std::move(r));
    }
  }
  absl::Status first;
  for (auto& [id, c] : causes) {
    absl::Status s = incidents_.SetCauses(id, std::move(c), now, changes);
    if (!s.ok() && first.ok()) first = s;
  }
  for (auto& [id, r] : radius) {
    absl::Status s = incidents_.SetAffected(id, std::move(r), now, changes);
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

}  // namespace ringside::analysis
