#include "analysis/straggler_detector.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ringside::analysis {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int SizeClassOf(uint64_t bytes) {
  int c = 0;
  while (bytes > 1) {
    bytes >>= 1;
    ++c;
  }
  return c;
}

}  // namespace

std::string StragglerDetector::WorkerKey(const std::string& job, const Worker& w) {
  if (w.global_rank >= 0) return absl::StrCat(job, "/r", w.global_rank);
  return absl::StrCat(job, "/", w.host, "/", w.pid);
}

std::map<std::string, std::string> StragglerDetector::EntityOf(const Comm& comm,
                                                              uint32_t rank) const {
  std::map<std::string, std::string> e;
  e["job"] = comm.job;
  const Worker& w = comm.workers[rank];
  e["rank"] = absl::StrCat(w.global_rank >= 0 ? w.global_rank : static_cast<int64_t>(rank));
  if (!w.host.empty()) e["node"] = w.host;
  if (!w.pod.empty()) {
    e["pod"] = w.pod;
    e["namespace"] = w.pod_namespace;
  }
  e["comm"] = comm.name;
  return e;
}

void StragglerDetector::LogOp(const CollectiveObservation& obs) {
  Worker w{obs.host, obs.global_rank, obs.pid, {}, {}};
  OpLog& log = ops_[WorkerKey(obs.job, w)];
  log.ops.push_back(OpLog::Op{obs.stop_ns, obs.duration_ns(), obs.is_p2p()});
  while (log.ops.size() > 8192) log.ops.pop_front();
  if (!obs.is_p2p()) log.comms[{obs.job, obs.comm_id}] = obs.nranks;
}

void StragglerDetector::Observe(const CollectiveObservation& obs, std::vector<Finding>& out) {
  LogOp(obs);
  if (obs.is_p2p()) return;
  if (obs.nranks < 2 || obs.rank >= obs.nranks || obs.nranks > 1u << 20) return;
  Comm& comm = comms_[{obs.job, obs.comm_id}];
  if (comm.nranks != obs.nranks) {  // first record, or the communicator was rebuilt
    comm = Comm{};
    comm.job = obs.job;
    comm.nranks = obs.nranks;
    comm.workers.resize(obs.nranks);
  }
  if (!obs.comm_name.empty()) comm.name = obs.comm_name;
  if (comm.name.empty()) comm.name = absl::StrFormat("%016x", obs.comm_id);
  comm.workers[obs.rank] =
      Worker{obs.host, obs.global_rank, obs.pid, obs.pod, obs.pod_namespace};

  auto key = std::make_pair(obs.function, obs.seq);
  auto [it, fresh] = comm.pending.try_emplace(key);
  Pending& p = it->second;
  if (fresh) {
    p.ranks.resize(obs.nranks);
    p.first_ns = obs.start_ns;
    p.bytes = obs.bytes;
    if (comm.pending.size() > options_.max_pending_per_comm) {
      // The oldest pending instance will never complete in time: forget it.
      auto oldest = comm.pending.begin();
      for (auto i = comm.pending.begin(); i != comm.pending.end(); ++i) {
        if (i->second.first_ns < oldest->second.first_ns) oldest = i;
      }
      if (oldest != it) {
        comm.pending.erase(oldest);
        ++expired_;
      }
    }
  }
  Arrival& a = p.ranks[obs.rank];
  if (a.seen) return;  // a duplicate record
  a = Arrival{true, obs.start_ns, obs.duration_ns(), obs.clock_synchronized};
  if (++p.seen < obs.nranks) return;
  Pending done = std::move(p);
  comm.pending.erase(it);
  Complete(comm, obs.function, done, out);
}

void StragglerDetector::Complete(Comm& comm, const std::string& function, const Pending& p,
                                 std::vector<Finding>& out) {
  ++completed_;
  const size_t n = p.ranks.size();
  bool synced = true;
  for (const Arrival& a : p.ranks) synced &= a.synced;
  // Order ranks by lateness: arrival time with synchronised clocks, else shortest kernel time.
  std::vector<uint32_t> order(n);
  for (uint32_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) {
    return synced ? p.ranks[x].start_ns > p.ranks[y].start_ns
                  : p.ranks[x].duration_ns < p.ranks[y].duration_ns;
  });
  const Arrival& last = p.ranks[order[0]];
  const Arrival& second = p.ranks[order[1]];
  const int64_t gap = synced ? last.start_ns - second.start_ns
                             : second.duration_ns - last.duration_ns;
  const int64_t base = last.duration_ns;  // the collective's own time: the late rank waits for no one
  Judged j;
  j.gap_ns = gap;
  const double need = std::max(absl::ToDoubleNanoseconds(options_.min_margin),
                               options_.min_margin_ratio * static_cast<double>(base));
  if (static_cast<double>(gap) >= need) j.last_rank = static_cast<int32_t>(order[0]);
  // Instance times on rank 0's clock (spans are what matter, so clock offsets cancel).
  j.begin_ns = p.ranks[0].start_ns;
  j.end_ns = p.ranks[0].start_ns + p.ranks[0].duration_ns;
  int64_t shortest = p.ranks[0].duration_ns;
  for (const Arrival& a : p.ranks) {
    j.span_ns = std::max(j.span_ns, a.duration_ns);
    shortest = std::min(shortest, a.duration_ns);
  }
  std::vector<double>& wait = comm.wait[function];
  wait.resize(n, -1);
  const double alpha = 2.0 / (std::max(options_.window, 1) + 1);
  for (size_t r = 0; r < n; ++r) {
    const int64_t d = p.ranks[r].duration_ns;
    const double w = d > 0 ? static_cast<double>(d - shortest) / static_cast<double>(d) : 0;
    wait[r] = wait[r] < 0 ? w : wait[r] + alpha * (w - wait[r]);
  }
  std::deque<Judged>& window = comm.windows[function];
  window.push_back(j);
  while (window.size() > static_cast<size_t>(options_.window)) window.pop_front();
  Judge(comm, function, out);
  JudgeSlowdown(comm, function, p, base, j.end_ns, out);
}

double StragglerDetector::P2pWaitFraction(const Worker& w, const std::string& job,
                                          int64_t span) const {
  auto it = ops_.find(WorkerKey(job, w));
  if (it == ops_.end() || it->second.ops.empty() || span <= 0) return 0;
  // The worker's own clock: its most recent `span` of point-to-point time.
  const int64_t latest = it->second.ops.back().end_ns;
  double blocked = 0;
  for (const OpLog::Op& op : it->second.ops) {
    if (op.p2p && op.end_ns >= latest - span) blocked += static_cast<double>(op.duration_ns);
  }
  return blocked / static_cast<double>(span);
}

double StragglerDetector::BusyNs(const std::string& worker_key, int64_t span) const {
  auto it = ops_.find(worker_key);
  if (it == ops_.end() || it->second.ops.empty()) return -1;
  const int64_t latest = it->second.ops.back().end_ns;
  double in_ops = 0;
  for (const OpLog::Op& op : it->second.ops) {
    if (op.end_ns >= latest - span) in_ops += static_cast<double>(op.duration_ns);
  }
  return std::max(0.0, static_cast<double>(span) - in_ops);
}

double StragglerDetector::BusyRatio(const Comm& comm, uint32_t rank, int64_t span) const {
  const std::string key = WorkerKey(comm.job, comm.workers[rank]);
  auto it = ops_.find(key);
  if (it == ops_.end()) return 0;
  // The candidate's largest communicator: its data-parallel group.
  std::pair<std::string, uint64_t> largest;
  uint32_t most = 0;
  for (const auto& [c, n] : it->second.comms) {
    if (n > most) {
      most = n;
      largest = c;
    }
  }
  auto peers = comms_.find(largest);
  if (peers == comms_.end()) return 0;
  std::vector<double> others;
  for (const Worker& w : peers->second.workers) {
    const std::string k = WorkerKey(peers->second.job, w);
    if (k == key) continue;
    double b = BusyNs(k, span);
    if (b >= 0) others.push_back(b);
  }
  const double mine = BusyNs(key, span);
  const double median = Median(others);
  if (mine < 0 || others.empty() || median <= 0) return 0;
  return mine / median;
}

void StragglerDetector::Judge(Comm& comm, const std::string& function, std::vector<Finding>& out) {
  // While a straggler is open, only the window that flagged it can resolve or update it.
  if (comm.flagged >= 0 && function != comm.flagged_function) return;
  const std::deque<Judged>& window = comm.windows[function];
  const int n = static_cast<int>(window.size());
  std::map<int32_t, int> late;
  std::map<int32_t, int64_t> caused;
  for (const Judged& j : window) {
    if (j.last_rank < 0) continue;
    ++late[j.last_rank];
    caused[j.last_rank] += j.gap_ns;
  }
  int32_t top = -1;
  int top_count = 0;
  for (const auto& [rank, count] : late) {
    if (count > top_count) {
      top = rank;
      top_count = count;
    }
  }
  const int64_t span = window.back().end_ns - window.front().begin_ns;
  const auto emit = [&](uint32_t rank, bool active, double score, double wait_fraction,
                        double victim_fraction, int count) {
    Finding f;
    f.kind = IncidentKind::kStraggler;
    f.entity = EntityOf(comm, rank);
    f.at = absl::FromUnixNanos(window.back().end_ns);
    f.active = active;
    f.severity = wait_fraction >= 0.2 ? Severity::kCritical : Severity::kWarning;
    f.evidence["score"] = score;
    f.evidence["late_instances"] = count;
    f.evidence["window_instances"] = n;
    f.evidence["wait_fraction"] = wait_fraction;
    f.evidence["p2p_wait_fraction"] = victim_fraction;
    f.evidence["comm_rank"] = rank;
    std::vector<double> gaps;
    for (const Judged& j : window) {
      if (j.last_rank == static_cast<int32_t>(rank)) gaps.push_back(j.gap_ns / 1e6);
    }
    f.evidence["margin_ms"] = Median(gaps);
    const Worker& w = comm.workers[rank];
    const std::string pod =
        w.pod.empty() ? "" : absl::StrCat(" (pod ", w.pod_namespace, "/", w.pod, ")");
    f.summary = absl::StrFormat(
        "rank %s%s of job %s arrived last in %d of the last %d %s on %s, by %.1f ms "
        "(median); the others waited %.0f%% of the time",
        f.entity["rank"], pod, comm.job, count, n, function, comm.name, f.evidence["margin_ms"],
        100 * std::min(1.0, wait_fraction));
    out.push_back(std::move(f));
  };

  if (comm.flagged >= 0) {
    const int count = late.count(comm.flagged) ? late[comm.flagged] : 0;
    if (n >= options_.window && count <= options_.resolve_fraction * n) {
      emit(comm.flagged, false, static_cast<double>(count) / n, 0, 0, count);
      comm.flagged = -1;
      --open_stragglers_[comm.job];
    } else if (top != comm.flagged || span <= 0) {
      return;  // keep it open; a different rank must first lose its lead
    } else {
      const double score = static_cast<double>(count) / n;
      if (std::abs(score - comm.flagged_score) >= 0.1) {  // an update worth telling
        comm.flagged_score = score;
        const double wf = static_cast<double>(caused[top]) / static_cast<double>(span);
        emit(comm.flagged, true, score, wf, P2pWaitFraction(comm.workers[top], comm.job, span),
             count);
      }
    }
    return;
  }
  if (top < 0 || span <= 0) return;
  if (top_count < options_.min_count || top_count < options_.min_last_fraction * n) return;
  const double wait_fraction = static_cast<double>(caused[top]) / static_cast<double>(span);
  if (wait_fraction < options_.min_wait_fraction) return;
  const double victim = P2pWaitFraction(comm.workers[top], comm.job, span);
  if (victim >= options_.victim_wait_fraction) return;  // waiting on its pipeline peer: a victim
  const double busy_ratio = BusyRatio(comm, static_cast<uint32_t>(top), span);
  if (busy_ratio < options_.min_busy_ratio) return;  // no slower than its peers: structural order
  comm.flagged = top;
  comm.flagged_function = function;
  ++open_stragglers_[comm.job];
  comm.flagged_score = static_cast<double>(top_count) / n;
  emit(static_cast<uint32_t>(top), true, comm.flagged_score, wait_fraction, victim, top_count);
}

void StragglerDetector::JudgeSlowdown(Comm& comm, const std::string& function, const Pending& p,
                                      int64_t base_ns, int64_t end_ns, std::vector<Finding>& out) {
  SizeClass& sc = comm.sizes[{function, SizeClassOf(p.bytes)}];
  const double t = base_ns / 1e9;
  if (static_cast<int>(sc.baseline.size()) < options_.baseline_instances) {
    sc.baseline.push_back(t);
    return;
  }
  sc.recent.push_back(t);
  while (static_cast<int>(sc.recent.size()) > options_.slowdown_window) sc.recent.pop_front();
  if (static_cast<int>(sc.recent.size()) < options_.slowdown_window) return;
  const double baseline = Median(sc.baseline);
  const double current = Median(std::vector<double>(sc.recent.begin(), sc.recent.end()));
  const double ratio = baseline > 0 ? current / baseline : 0;
  const bool slow = ratio >= options_.slowdown_ratio &&
                    current - baseline >= absl::ToDoubleSeconds(options_.slowdown_min_delta) &&
                    open_stragglers_[comm.job] == 0;
  const bool clear = ratio < options_.slowdown_resolve_ratio;
  if (slow == sc.active || (!slow && !clear)) return;
  sc.active = slow;
  Finding f;
  f.kind = IncidentKind::kJobSlowdown;
  f.entity = {{"job", comm.job}, {"comm", comm.name}, {"function", function}};
  f.at = absl::FromUnixNanos(end_ns);
  f.active = slow;
  f.evidence["baseline_ms"] = baseline * 1e3;
  f.evidence["current_ms"] = current * 1e3;
  f.evidence["ratio"] = ratio;
  f.evidence["bytes"] = static_cast<double>(p.bytes);
  f.summary = absl::StrFormat("%s on %s takes %.2fx its baseline (%.2f ms vs %.2f ms) on every rank",
                              function, comm.name, ratio, current * 1e3, baseline * 1e3);
  out.push_back(std::move(f));
}

void StragglerDetector::Expire(absl::Time now) {
  const int64_t cutoff = absl::ToUnixNanos(now - options_.pending_timeout);
  for (auto& [key, comm] : comms_) {
    for (auto it = comm.pending.begin(); it != comm.pending.end();) {
      if (it->second.first_ns < cutoff) {
        it = comm.pending.erase(it);
        ++expired_;
      } else {
        ++it;
      }
    }
  }
}

}  // namespace ringside::analysis
