#include "sim/soak.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "analysis/detection_options.h"
#include "analysis/incidents.h"
#include "daemon/aggregator/analysis_host.h"
#include "daemon/aggregator/ingest/ingest_core.h"
#include "daemon/aggregator/ingest/ingest_stats.h"
#include "sim/job_model.h"
#include "sim/soak_node.h"
#include "sim/topology_writer.h"

namespace ringside::sim {
namespace {

// Virtual time of simulation time 0: fixed, so a soak is the same in every run of a seed.
constexpr int64_t kT0UnixSeconds = 1767225600;  // 2026-01-01T00:00:00Z
// The job's communicator and bucket, as sim/job_runner.cc gives them to the plugin.
constexpr uint64_t kCommId = 0x51a1c0ffee000001ull;
constexpr uint64_t kBucketBytes = uint64_t{64 << 20} * 2;  // 64 Mi bf16 elements
constexpr int kMaxRecordsPerMessage = 2048;  // UploaderOptions::max_collective_records_per_message

absl::Status CheckScenario(const Scenario& s, analysis::FabricAnalysisOptions* detection) {
  for (const FaultSpec& f : s.faults) {
    if (f.kind == FaultKind::kAgentCrash || f.kind == FaultKind::kNvlinkDegraded ||
        f.kind == FaultKind::kGpuThermalSlowdown || f.kind == FaultKind::kGpuPowerCap ||
        f.kind == FaultKind::kGpuXid || f.kind == FaultKind::kCpuThrottled) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the soak does not simulate ", FaultKindName(f.kind),
          " faults (no agent processes, no NVML); use `ringside-sim run` for this scenario"));
    }
    if (f.node < 0 || f.node >= s.nodes || f.rank >= s.ranks()) {
      return absl::InvalidArgumentError(absl::StrCat("a ", FaultKindName(f.kind),
                                                     " fault names a node or rank beyond the ",
                                                     s.nodes, "-node cluster"));
    }
  }
  for (const std::string& a : s.aggregator_args) {
    absl::string_view v = a;
    if (!absl::ConsumePrefix(&v, "--detect-set=") && !absl::ConsumePrefix(&v, "--detect_set=")) {
      return absl::InvalidArgumentError(
          absl::StrCat("aggregator_args: the soak takes only --detect-set=..., not \"", a, "\""));
    }
    if (absl::Status st = analysis::ParseDetectionAssignments(v, *detection); !st.ok()) return st;
  }
  if (s.interval < absl::Milliseconds(1)) {
    return absl::InvalidArgumentError("the sampling interval must be at least 1ms");
  }
  return absl::OkStatus();
}

std::string Hours(absl::Duration d) { return absl::StrFormat("%.2f h", absl::ToDoubleHours(d)); }

std::string Offset(absl::Duration d) {
  const int64_t s = absl::ToInt64Seconds(d);
  return absl::StrFormat("+%dh%02dm%02ds", s / 3600, (s / 60) % 60, s % 60);
}

absl::StatusOr<SimIncident> ToSim(const analysis::Incident& i) {
  absl::StatusOr<std::vector<SimIncident>> v =
      ParseIncidentsJson(absl::StrCat("[", analysis::IncidentJson(i), "]"));
  if (!v.ok()) return v.status();
  if (v->size() != 1) return absl::InternalError("incident JSON did not round-trip");
  return (*v)[0];
}

// The records one all-reduce iteration leaves on each node, as the agent forwards them (pid as the
// agent sees it, host as ringside names it).
void AppendIteration(const Scenario& s, const Iteration& it,
                     std::vector<v1::CollectiveBatch>& batches) {
  const int ranks = s.ranks();
  for (int r = 0; r < ranks; ++r) {
    v1::CollectiveRecord* c = batches[r / s.gpus].add_records();
    c->set_job_id(s.job_id);
    c->set_comm_id(kCommId);
    c->set_comm_name("world");
    c->set_rank(static_cast<uint32_t>(r));
    c->set_nranks(static_cast<uint32_t>(ranks));
    c->set_function("AllReduce");
    c->set_seq(it.index);
    c->set_bytes(kBucketBytes);
    c->set_algorithm("RING");
    c->set_protocol("SIMPLE");
    c->set_channels(4);
    c->set_kernel_start_unix_nanos(it.arrive_ns[r]);
    c->set_kernel_stop_unix_nanos(it.stop_ns[r]);
    c->set_enqueue_unix_nanos(it.arrive_ns[r]);
    c->set_pid(static_cast<uint32_t>(100000 + r));
    c->set_host(s.NodeName(r / s.gpus));
    c->set_clock_synchronized(true);
  }
}

}  // namespace

absl::StatusOr<SoakResult> RunSoak(const Scenario& s, const SoakOptions& o,
                                   volatile std::sig_atomic_t* stop) {
  analysis::FabricAnalysisOptions detection;
  if (absl::Status st = CheckScenario(s, &detection); !st.ok()) return st;
  if (!(o.node_hours > 0) || s.nodes < 1) {
    return absl::InvalidArgumentError("--node-hours must be positive");
  }
  SoakResult r;
  r.t0 = absl::FromUnixSeconds(kT0UnixSeconds);
  const absl::Duration total = absl::Seconds(std::ceil(o.node_hours * 3600.0 / s.nodes));
  absl::Time now = r.t0;
  const auto clock = [&now] { return now; };

  // The aggregator side: the analysis host (flushed below, on the virtual clock, never by its own
  // thread) observing a real IngestCore.
  const std::string topology = o.work_dir + "/topology.ibnetdiscover";
  {
    std::ofstream t(topology);
    t << IbnetdiscoverTopology(s);
    if (!t) return absl::InternalError("cannot write " + topology);
  }
  daemon::AnalysisHostOptions ao;
  ao.analysis = detection;
  ao.topology_file = topology;
  ao.flush_interval = absl::InfiniteDuration();
  ao.now = clock;
  absl::StatusOr<std::unique_ptr<daemon::AnalysisHost>> host = daemon::AnalysisHost::Start(ao);
  if (!host.ok()) return host.status();
  absl::Mutex mu;
  std::map<uint64_t, analysis::Incident> incidents;
  (*host)->AddListener([&](const std::vector<analysis::IncidentChange>& changes) {
    absl::MutexLock l(&mu);
    for (const analysis::IncidentChange& c : changes) {
      incidents[c.incident.id] = c.incident;
      if (c.type == analysis::IncidentChangeType::kOpened && o.on_incident) {
        if (absl::StatusOr<SimIncident> si = ToSim(c.incident); si.ok()) o.on_incident(*si);
      }
    }
  });
  daemon::IngestStats stats;
  daemon::IngestOptions io;
  io.now = clock;
  io.log = [](const std::string&) {};
  daemon::IngestCore core(io, &stats);
  core.SetObserver(host->get());

  std::vector<std::unique_ptr<SoakNode>> nodes;
  for (int i = 0; i < s.nodes; ++i) {
    const std::string dir = absl::StrCat(o.work_dir, "/", s.NodeName(i));
    absl::StatusOr<std::unique_ptr<SoakNode>> n = SoakNode::Create(s, i, dir, clock);
    if (!n.ok()) return n.status();
    if (absl::Status st = (*n)->Connect(&core, s.seed); !st.ok()) return st;
    nodes.push_back(std::move(*n));
  }

  std::unique_ptr<JobModel> job;
  const Iteration* it = nullptr;
  if (s.job) {
    job = std::make_unique<JobModel>(s, absl::ToUnixNanos(r.t0));
    it = &job->Next();
  }
  const absl::Time wall_start = absl::Now();
  absl::Time next_progress = wall_start + o.progress_every;
  absl::Time next_flush = r.t0 + absl::Seconds(1);
  const int64_t steps = static_cast<int64_t>(std::ceil(total / s.interval));
  std::vector<v1::CollectiveBatch> batches(s.nodes);
  absl::Duration t;
  for (int64_t k = 1; k <= steps; ++k) {
    if (stop != nullptr && *stop) {
      r.interrupted = true;
      break;
    }
    t = s.interval * k;
    now = r.t0 + t;
    for (auto& n : nodes) {
      if (absl::Status st = n->Animate(t); !st.ok()) return st;
    }
    // Collectives the plugin has reported by now (a millisecond after the kernels end), in
    // messages of at most the Uploader's record limit.
    if (job) {
      const auto send_batches = [&]() -> absl::Status {
        for (int i = 0; i < s.nodes; ++i) {
          if (batches[i].records_size() == 0) continue;
          r.collective_records += static_cast<uint64_t>(batches[i].records_size());
          v1::AgentMessage m;
          *m.mutable_collectives() = std::move(batches[i]);
          batches[i] = v1::CollectiveBatch();
          if (absl::Status st = nodes[i]->Send(std::move(m)); !st.ok()) return st;
        }
        return absl::OkStatus();
      };
      const int64_t now_ns = absl::ToUnixNanos(now);
      while (it->end_ns + 1'000'000 <= now_ns) {
        AppendIteration(s, *it, batches);
        it = &job->Next();
        if (batches[0].records_size() + s.gpus > kMaxRecordsPerMessage) {
          if (absl::Status st = send_batches(); !st.ok()) return st;
        }
      }
      if (absl::Status st = send_batches(); !st.ok()) return st;
    }
    for (auto& n : nodes) {
      if (absl::Status st = n->SampleAndSend(&r.samples); !st.ok()) return st;
      ++r.cycles;
    }
    if (now >= next_flush) {
      (*host)->Flush(now);
      next_flush = now + absl::Seconds(1);
    }
    if (o.progress && absl::Now() >= next_progress) {
      next_progress = absl::Now() + o.progress_every;
      const double wall = absl::ToDoubleSeconds(absl::Now() - wall_start);
      size_t raised;
      {
        absl::MutexLock l(&mu);
        raised = incidents.size();
      }
      const double frac = static_cast<double>(k) / static_cast<double>(steps);
      o.progress(absl::StrFormat(
          "soak: %s of %s simulated (%.0f%%), %.1f node-hours, %d incidents, %.0fx real time, "
          "about %.0f s left",
          Hours(t), Hours(total), 100 * frac, s.nodes * absl::ToDoubleHours(t), raised,
          absl::ToDoubleSeconds(t) / std::max(wall, 1e-9),
          wall * (1 - frac) / std::max(frac, 1e-9)));
    }
  }
  (*host)->Flush(now);
  r.wall_seconds = absl::ToDoubleSeconds(absl::Now() - wall_start);
  r.simulated = t;
  r.node_hours = s.nodes * absl::ToDoubleHours(t);
  for (const auto& n : nodes) r.read_errors += n->read_errors();
  {
    absl::MutexLock l(&mu);
    for (const auto& [id, inc] : incidents) {
      absl::StatusOr<SimIncident> si = ToSim(inc);
      if (!si.ok()) return si.status();
      r.incidents.push_back(std::move(*si));
    }
  }
  r.score = Score(s, r.t0, r.simulated, r.incidents);
  return r;
}

std::string FormatSoakSummary(const Scenario& s, const SoakResult& r, double max_per_1000h) {
  std::string out = absl::StrFormat(
      "soak %s: %d nodes x %d GPUs sampled every %s for %s%s = %.1f node-hours\n"
      "  %d sampling cycles, %d counter values and %d collective records ingested, %d read "
      "errors\n"
      "  wall time %.1f s: %.0fx real time\n",
      s.name, s.nodes, s.gpus, absl::FormatDuration(s.interval), Hours(r.simulated),
      r.interrupted ? " (interrupted)" : "", r.node_hours, r.cycles, r.samples,
      r.collective_records, r.read_errors, r.wall_seconds, r.speedup());
  absl::StrAppendFormat(&out, "  incidents raised: %d\n", r.incidents.size());
  for (const SimIncident& i : r.incidents) {
    bool expected = false;
    const int fault = ExplainingFault(s, r.t0, i, &expected);
    absl::StrAppendFormat(&out, "    #%d %s %s opened at %s%s\n", i.id, i.kind,
                          EntityText(i.entity), Offset(i.opened - r.t0),
                          fault < 0 ? " — FALSE ALARM" : (expected ? " — expected" : ""));
  }
  const bool ok = r.false_alarms_per_1000h() <= max_per_1000h;
  absl::StrAppendFormat(&out, "  false alarms: %d = %.3f per 1,000 node-hours (bound %.3f): %s\n",
                        r.false_alarms(), r.false_alarms_per_1000h(), max_per_1000h,
                        ok ? "PASS" : "FAIL");
  if (!s.faults.empty()) {
    absl::StrAppendFormat(
        &out, "  injected faults: %s\n",
        r.score.all_detected() ? "every one detected as expected" : "NOT all detected as expected");
  }
  return out;
}

std::string SoakMarkdown(const Scenario& s, const SoakResult& r, double max_per_1000h,
                         const std::string& command) {
  std::string out = absl::StrFormat(
      "## Soak: %s, %.4g node-hours (%s)\n\n"
      "`%s`\n\n"
      "| nodes × GPUs | interval | simulated | node-hours | sampling cycles | counter values | "
      "collective records | wall time | speed-up | incidents | false alarms | per 1,000 "
      "node-hours |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n"
      "| %d × %d | %s | %s | %.1f | %d | %d | %d | %.0f s | %.0fx | %d | %d | %.3f (bound %.3f: "
      "%s) |\n\n",
      s.name, r.node_hours,
      absl::FormatTime("%Y-%m-%d %H:%M UTC", absl::Now(), absl::UTCTimeZone()), command, s.nodes,
      s.gpus, absl::FormatDuration(s.interval), Hours(r.simulated), r.node_hours, r.cycles,
      r.samples, r.collective_records, r.wall_seconds, r.speedup(), r.incidents.size(),
      r.false_alarms(), r.false_alarms_per_1000h(), max_per_1000h,
      r.false_alarms_per_1000h() <= max_per_1000h ? "pass" : "FAIL");
  if (!r.incidents.empty()) {
    out +=
        "| # | kind | entity | opened (simulation time) | false alarm |\n|---|---|---|---|---|\n";
    for (const SimIncident& i : r.incidents) {
      bool expected = false;
      const int fault = ExplainingFault(s, r.t0, i, &expected);
      absl::StrAppendFormat(&out, "| %d | %s | %s | %s | %s |\n", i.id, i.kind,
                            EntityText(i.entity), Offset(i.opened - r.t0),
                            fault < 0 ? "yes" : "no");
    }
    out += "\n";
  }
  return out;
}

}  // namespace ringside::sim
