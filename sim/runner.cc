#include "sim/runner.h"

#include <unistd.h>

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace ringside::sim {
namespace {

std::string Stamp(absl::Duration t) {
  return absl::StrFormat("[%6.1fs]", absl::ToDoubleSeconds(t));
}

void PrintHowToLook(const Scenario& s, const Cluster& c, const RunOptions& ro) {
  std::FILE* o = ro.out;
  const std::string ctl = ro.ctl_bin.empty() ? "ringside" : ro.ctl_bin;
  std::fprintf(o,
               "ringside-sim: %d nodes × %d GPUs under %d leaf switches, a %d-rank job \"%s\", "
               "sampling every %s\n",
               s.nodes, s.gpus, (s.nodes + s.nodes_per_leaf - 1) / s.nodes_per_leaf, s.ranks(),
               s.job_id.c_str(), absl::FormatDuration(s.interval).c_str());
  std::fprintf(o, "  real processes: ringside-aggregator (gRPC 127.0.0.1:%d, HTTP 127.0.0.1:%d), "
                  "%d ringside-agent, %d rank processes driving libringside_nccl.so\n",
               c.grpc_port(), c.http_port(), s.nodes, s.job ? s.ranks() : 0);
  std::fprintf(o, "  look while it runs:\n");
  std::fprintf(o, "    %s incidents --aggregator=127.0.0.1:%d\n", ctl.c_str(), c.grpc_port());
  std::fprintf(o, "    %s watch --aggregator=127.0.0.1:%d\n", ctl.c_str(), c.grpc_port());
  std::fprintf(o, "    curl -s http://127.0.0.1:%d/api/v1/incidents\n", c.http_port());
  std::fprintf(o, "    curl -s http://127.0.0.1:%d/metrics            # the aggregator\n",
               c.http_port());
  const std::vector<int> ports = c.metrics_ports();
  for (size_t i = 0; i < ports.size() && i < 2; ++i) {
    std::fprintf(o, "    curl -s http://127.0.0.1:%d/metrics            # %s's agent\n", ports[i],
                 s.NodeName(static_cast<int>(i)).c_str());
  }
  if (ports.size() > 2) std::fprintf(o, "    (and %zu more agents)\n", ports.size() - 2);
  std::fprintf(o, "  faults ahead:\n");
  for (const FaultSpec& f : s.faults) {
    std::string what = absl::StrCat(FaultKindName(f.kind), " on ", s.NodeName(f.node));
    if (f.kind == FaultKind::kStraggler) absl::StrAppend(&what, " rank ", f.rank);
    std::fprintf(o, "    t=%-5s for %-5s %s%s%s\n", absl::FormatDuration(f.start).c_str(),
                 absl::FormatDuration(f.duration).c_str(), what.c_str(),
                 f.note.empty() ? "" : ": ", f.note.c_str());
  }
  std::fprintf(o, "  Ctrl-C stops it cleanly.\n\n");
  std::fflush(o);
}

void PrintIncident(const Scenario& s, absl::Time t0, const SimIncident& inc, bool resolved,
                   const RunOptions& ro) {
  const absl::Time at = resolved ? *inc.resolved : inc.opened;
  std::string line = absl::StrFormat("%s %-8s #%-3d %-13s %s", Stamp(at - t0),
                                     resolved ? "RESOLVED" : "OPENED", inc.id, inc.kind,
                                     EntityText(inc.entity));
  if (!resolved) {
    const std::string cause = CauseText(inc);
    if (!cause.empty()) absl::StrAppend(&line, "\n           cause: ", cause);
    bool expected = false, allowed = false;
    const int fi = ExplainingFault(s, t0, inc, &expected, &allowed);
    if (fi >= 0) {
      const FaultSpec& f = s.faults[fi];
      absl::StrAppend(&line, absl::StrFormat(
                                 "\n           ← %s injected at %s: detected after %.1f s%s",
                                 FaultKindName(f.kind), absl::FormatDuration(f.start),
                                 absl::ToDoubleSeconds(inc.opened - (t0 + f.start)),
                                 expected  ? ""
                                 : allowed ? " (on the way to what is expected)"
                                           : " (not the expected entity)"));
    } else {
      absl::StrAppend(&line, "\n           ← no injected fault explains it: a false alarm");
    }
    if (!inc.affected_jobs.empty()) {
      absl::StrAppend(&line, "\n           affects job ", absl::StrJoin(inc.affected_jobs, ", "));
    }
  } else {
    absl::StrAppend(&line, absl::StrFormat(" (open %.1f s)",
                                           absl::ToDoubleSeconds(*inc.resolved - inc.opened)));
  }
  std::fprintf(ro.out, "%s\n", line.c_str());
  std::fflush(ro.out);
}

}  // namespace

absl::StatusOr<RunResult> RunScenario(const Scenario& s, const ClusterOptions& co,
                                      const RunOptions& ro, volatile std::sig_atomic_t* stop) {
  absl::StatusOr<std::unique_ptr<Cluster>> cluster = Cluster::Start(s, co);
  if (!cluster.ok()) return cluster.status();
  Cluster& c = **cluster;
  RunResult r;
  r.t0 = c.t0();
  if (ro.live) PrintHowToLook(s, c, ro);
  IncidentReader reader(c.http_port(), c.state_dir());
  std::map<uint64_t, bool> seen;  // id → resolved
  std::map<uint64_t, std::string> causes;  // id → cause last printed
  std::set<std::string> dead_reported;
  absl::Time next_poll = r.t0 + ro.poll;
  auto poll = [&](bool print) {
    absl::StatusOr<std::vector<SimIncident>> incs = reader.Fetch();
    if (!incs.ok()) return;
    r.incidents = *incs;
    r.incident_source = reader.source();
    for (const SimIncident& inc : r.incidents) {
      auto it = seen.find(inc.id);
      if (it == seen.end()) {
        if (print) PrintIncident(s, r.t0, inc, false, ro);
        seen[inc.id] = false;
        causes[inc.id] = CauseText(inc);
        it = seen.find(inc.id);
      } else if (CauseText(inc) != causes[inc.id] && !inc.resolved.has_value()) {
        // The correlator found a cause later (a fabric incident detected after the straggler).
        causes[inc.id] = CauseText(inc);
        if (print) {
          std::fprintf(ro.out, "%s CAUSE    #%-3d %-13s %s\n           cause: %s\n",
                       Stamp(absl::Now() - r.t0).c_str(), static_cast<int>(inc.id),
                       inc.kind.c_str(), EntityText(inc.entity).c_str(), causes[inc.id].c_str());
          std::fflush(ro.out);
        }
      }
      if (inc.resolved.has_value() && !it->second) {
        it->second = true;
        if (print) PrintIncident(s, r.t0, inc, true, ro);
      }
    }
  };
  const absl::Duration step = co.step;
  while (!*stop) {
    const absl::Time now = absl::Now();
    const absl::Duration t = now - r.t0;
    if (t >= s.duration) break;
    for (const std::string& line : c.Step(t)) {
      if (ro.live) {
        std::fprintf(ro.out, "%s >>> injecting %s\n", Stamp(t).c_str(), line.c_str());
        std::fflush(ro.out);
      }
    }
    if (now >= next_poll) {
      poll(ro.live);
      next_poll = now + ro.poll;
      for (const std::string& d : c.DeadAgents()) {
        if (dead_reported.insert(d).second) {
          r.problems.push_back("the agent of " + d + " exited");
          if (ro.live) std::fprintf(ro.out, "%s !!! the agent of %s exited\n", Stamp(t).c_str(), d.c_str());
        }
      }
    }
    const absl::Duration left = step - (absl::Now() - now);
    if (left > absl::ZeroDuration()) absl::SleepFor(left);
  }
  r.interrupted = *stop != 0;
  r.ran = absl::Now() - r.t0;
  poll(ro.live);
  r.cpu = c.Cpu();
  c.Stop();
  r.score = Score(s, r.t0, r.ran, r.incidents);
  return r;
}

}  // namespace ringside::sim
