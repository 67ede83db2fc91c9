#include "analysis/straggler_detector.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "analysis/straggler_where.h"

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
  std::string key = w.global_rank >= 0 ? absl::StrCat(job, "/r", w.global_rank)
                                       : absl::StrCat(job, "/", w.host, "/", w.pid);
  if (w.cuda_device >= 0) absl::StrAppend(&key, "/gpu", w.cuda_device);
  return key;
}

std::string StragglerDetector::GpuKey(const Worker& w) {
  if (!w.gpu_bus_id.empty()) return absl::StrCat(w.host, "/", w.gpu_bus_id);
  if (w.cuda_device >= 0) return absl::StrCat(w.host, "/cuda", w.cuda_device);
  return "";
}

std::map<std::string, std::string> StragglerDetector::EntityOf(const Comm& comm,
                                                              uint32_t rank) const {
  std::map<std::string, std::string> e;
  e["job"] = comm.job;
  const Worker& w = comm.workers[rank];
  e["rank"] = absl::StrCat(w.global_rank >= 0 ? w.global_rank : static_cast<int64_t>(rank));
  if (!w.host.empty()) e["node"] = w.host;
  if (w.cuda_device >= 0) e["cuda_device"] = absl::StrCat(w.cuda_device);
  if (!w.pod.empty()) {
    e["pod"] = w.pod;
    e["namespace"] = w.pod_namespace;
  }
  e["comm"] = comm.name;
  return e;
}

void StragglerDetector::LogOp(const CollectiveObservation& obs) {
  Worker w{obs.host, obs.global_rank, obs.pid, obs.cuda_device, {}, {}, {}, 1, -1, -1};
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
    open_stragglers_[obs.job] -= static_cast<int>(comm.flagged.size());
    comm = Comm{};
    comm.job = obs.job;
    comm.nranks = obs.nranks;
    comm.workers.resize(obs.nranks);
  }
  if (!obs.comm_name.empty()) comm.name = obs.comm_name;
  if (comm.name.empty()) comm.name = absl::StrFormat("%016x", obs.comm_id);
  Worker& worker = comm.workers[obs.rank];
  const bool moved = worker.host_index < 0 || worker.host != obs.host ||
                     worker.gpu_bus_id != obs.gpu_pci_bus_id || worker.cuda_device != obs.cuda_device;
  worker = Worker{obs.host, obs.global_rank,   obs.pid,        obs.cuda_device,
                  obs.pod,  obs.pod_namespace, obs.gpu_pci_bus_id, worker.gpu_sharers,
                  worker.host_index, worker.gpu_index};
  if (moved) {  // its first record, or its process moved: look its node and GPU up once
    const auto index = [](std::map<std::string, int32_t>& m, const std::string& k) {
      return k.empty() ? -1 : m.try_emplace(k, static_cast<int32_t>(m.size())).first->second;
    };
    worker.host_index = index(comm.host_index, obs.host);
    worker.gpu_index = index(comm.gpu_index, GpuKey(worker));
  }

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
  a.seen = true;
  a.at.start_ns = obs.start_ns;
  a.at.duration_ns = obs.duration_ns();
  a.at.enqueue_ns = obs.enqueue_ns;
  a.at.synced = obs.clock_synchronized;
  a.at.clock_error_ns = obs.clock_error_ns;
  if (++p.seen < obs.nranks) return;
  Pending done = std::move(p);
  comm.pending.erase(it);
  Complete(comm, obs.function, done, out);
}

void StragglerDetector::Complete(Comm& comm, const std::string& function, const Pending& p,
                                 std::vector<Finding>& out) {
  ++completed_;
  const size_t n = p.ranks.size();
  // Which ranks share a clock (a node) and a GPU, as indexes.
  std::vector<RankArrival> ranks(n);
  for (size_t r = 0; r < n; ++r) {
    ranks[r] = p.ranks[r].at;
    ranks[r].host = comm.workers[r].host_index;
    ranks[r].gpu = comm.workers[r].gpu_index;
  }
  LatenessOptions lo;
  lo.min_margin = options_.min_margin;
  lo.min_margin_ratio = options_.min_margin_ratio;
  lo.clock_error_ratio = options_.clock_error_ratio;
  lo.gpu_sharing = options_.gpu_sharing;
  const InstanceLateness judged = JudgeInstance(ranks, lo);
  Judged j;
  int64_t shortest = p.ranks[0].at.duration_ns;
  for (size_t r = 0; r < n; ++r) {
    j.span_ns = std::max(j.span_ns, p.ranks[r].at.duration_ns);
    shortest = std::min(shortest, p.ranks[r].at.duration_ns);
    comm.workers[r].gpu_sharers = judged.ranks[r].gpu_sharers;
    const RankLateness& l = judged.ranks[r];
    if (l.lateness_ns >= judged.need_ns) {
      j.late.push_back(Late{static_cast<int32_t>(r), l.lateness_ns, l.host_ns, l.gpu_ns});
    }
  }
  const int64_t base = judged.base_ns;  // the collective's own time: the latest rank waits for no one
  // Instance times on rank 0's clock (spans are what matter, so clock offsets cancel).
  j.begin_ns = p.ranks[0].at.start_ns;
  j.end_ns = p.ranks[0].at.start_ns + p.ranks[0].at.duration_ns;
  const int64_t end_ns = j.end_ns;
  std::vector<double>& wait = comm.wait[function];
  wait.resize(n, -1);
  const double alpha = 2.0 / (std::max(options_.window, 1) + 1);
  for (size_t r = 0; r < n; ++r) {
    const int64_t d = p.ranks[r].at.duration_ns;
    const double w = d > 0 ? static_cast<double>(d - shortest) / static_cast<double>(d) : 0;
    wait[r] = wait[r] < 0 ? w : wait[r] + alpha * (w - wait[r]);
  }
  Window& window = comm.windows[function];
  for (const Late& l : j.late) {
    Window::Tally& t = window.tally[l.rank];
    ++t.count;
    t.lateness_ns += l.lateness_ns;
  }
  window.instances.push_back(std::move(j));
  while (window.instances.size() > static_cast<size_t>(std::max(options_.window, 1))) {
    for (const Late& l : window.instances.front().late) {
      auto it = window.tally.find(l.rank);
      if (it == window.tally.end()) continue;
      it->second.lateness_ns -= l.lateness_ns;
      if (--it->second.count <= 0) window.tally.erase(it);
    }
    window.instances.pop_front();
  }
  Judge(comm, function, out);
  JudgeSlowdown(comm, function, p, base, end_ns, out);
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

double StragglerDetector::BusyRatio(const Comm& comm, uint32_t rank, int64_t span,
                                    BusyCache& cache) const {
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
  auto [members, fresh] = cache.try_emplace(largest);
  if (fresh) {
    members->second.reserve(peers->second.workers.size());
    for (const Worker& w : peers->second.workers) {
      std::string k = WorkerKey(peers->second.job, w);
      const double b = BusyNs(k, span);
      members->second.emplace_back(std::move(k), b);
    }
  }
  std::vector<double> others;
  others.reserve(members->second.size());
  for (const auto& [k, b] : members->second) {
    if (k != key && b >= 0) others.push_back(b);
  }
  const double mine = BusyNs(key, span);
  const double median = Median(others);
  if (mine < 0 || others.empty() || median <= 0) return 0;
  return mine / median;
}

void StragglerDetector::Emit(const Comm& comm, const std::string& function, uint32_t rank,
                             bool active, double score, double wait_fraction,
                             double victim_fraction, int count, std::vector<Finding>& out) const {
  const std::deque<Judged>& window = comm.windows.at(function).instances;
  const int n = static_cast<int>(window.size());
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
  std::vector<double> lateness, host, gpu;
  double host_sum = 0, split_sum = 0;
  for (const Judged& j : window) {
    for (const Late& l : j.late) {
      if (l.rank != static_cast<int32_t>(rank)) continue;
      lateness.push_back(l.lateness_ns / 1e6);
      if (l.host_ns < 0) continue;
      host.push_back(l.host_ns / 1e6);
      gpu.push_back(l.gpu_ns / 1e6);
      host_sum += static_cast<double>(l.host_ns);
      split_sum += static_cast<double>(l.host_ns + l.gpu_ns);
    }
  }
  // Where: from the late instances whose clocks allowed the split, when they are at least half.
  const bool split = !host.empty() && 2 * host.size() >= lateness.size() && split_sum > 0;
  f.evidence["margin_ms"] = Median(std::move(lateness));
  if (split) {
    f.evidence["host_lateness_ms"] = Median(std::move(host));
    f.evidence["gpu_lateness_ms"] = Median(std::move(gpu));
    f.evidence["host_share"] = host_sum / split_sum;
  }
  const Worker& w = comm.workers[rank];
  if (w.gpu_sharers > 1) f.evidence["gpu_sharing_ranks"] = w.gpu_sharers;
  const std::string at = StragglerWhere(f.evidence);
  std::vector<std::string> parts;  // its GPU and pod, when known
  if (w.cuda_device >= 0) parts.push_back(absl::StrCat("cuda device ", w.cuda_device));
  if (!w.pod.empty()) parts.push_back(absl::StrCat("pod ", w.pod_namespace, "/", w.pod));
  const std::string pod = parts.empty() ? "" : absl::StrCat(" (", absl::StrJoin(parts, ", "), ")");
  std::string why =
      "; host and GPU lateness not told apart (no enqueue times, or clocks not comparable)";
  if (at == "host") {
    why = absl::StrFormat("; late on the host: enqueued %.1f ms late (its GPU %.1f ms)",
                          f.evidence["host_lateness_ms"], f.evidence["gpu_lateness_ms"]);
  } else if (at == "gpu") {
    why = absl::StrFormat("; late on the GPU: enqueued on time (%.1f ms), kernel started %.1f ms late",
                          f.evidence["host_lateness_ms"], f.evidence["gpu_lateness_ms"]);
  }
  if (w.gpu_sharers > 1) {
    absl::StrAppend(&why, absl::StrFormat("; its GPU is shared by %d ranks of the communicator "
                                          "(the wait that sharing explains is left out)",
                                          w.gpu_sharers));
  }
  f.summary = absl::StrFormat(
      "rank %s%s of job %s arrived late in %d of the last %d %s on %s, by %.1f ms (median, "
      "behind the communicator's median rank)%s; the others waited %.0f%% of the time",
      f.entity["rank"], pod, comm.job, count, n, function, comm.name, f.evidence["margin_ms"], why,
      100 * std::min(1.0, wait_fraction));
  out.push_back(std::move(f));
}

void StragglerDetector::Judge(Comm& comm, const std::string& function, std::vector<Finding>& out) {
  const Window& window = comm.windows[function];
  if (window.instances.empty()) return;
  const int n = static_cast<int>(window.instances.size());
  const int64_t span = window.instances.back().end_ns - window.instances.front().begin_ns;
  const auto wait_fraction = [&](int32_t rank) {
    auto it = window.tally.find(rank);
    if (it == window.tally.end() || span <= 0) return 0.0;
    return static_cast<double>(it->second.lateness_ns) / static_cast<double>(span);
  };
  // The open findings this function's window flagged: each resolves or updates on its own count,
  // whoever else is late meanwhile.
  for (auto it = comm.flagged.begin(); it != comm.flagged.end();) {
    const int32_t rank = it->first;
    Flag& flag = it->second;
    if (flag.function != function) {
      ++it;
      continue;
    }
    const int count = window.CountOf(rank);
    const double score = static_cast<double>(count) / n;
    if (n >= options_.window && count <= options_.resolve_fraction * n) {
      Emit(comm, function, static_cast<uint32_t>(rank), false, score, 0, 0, count, out);
      it = comm.flagged.erase(it);
      --open_stragglers_[comm.job];
      continue;
    }
    if (span > 0 && std::abs(score - flag.score) >= 0.1) {  // an update worth telling
      flag.score = score;
      Emit(comm, function, static_cast<uint32_t>(rank), true, score, wait_fraction(rank),
           P2pWaitFraction(comm.workers[rank], comm.job, span), count, out);
    }
    ++it;
  }
  if (span <= 0) return;
  // New stragglers: a rank's count only grows when it is late, so the ranks late in the newest
  // instance are the only ones that can have just qualified.
  BusyCache busy;
  for (const Late& l : window.instances.back().late) {
    if (comm.flagged.count(l.rank)) continue;  // open already (from this or another function)
    const int count = window.CountOf(l.rank);
    if (count < options_.min_count || count < options_.min_last_fraction * n) continue;
    const double wf = wait_fraction(l.rank);
    if (wf < options_.min_wait_fraction) continue;
    const double victim = P2pWaitFraction(comm.workers[l.rank], comm.job, span);
    if (victim >= options_.victim_wait_fraction) continue;  // waiting on its pipeline peer
    const double busy_ratio = BusyRatio(comm, static_cast<uint32_t>(l.rank), span, busy);
    if (busy_ratio < options_.min_busy_ratio) continue;  // no slower than its peers: structural
    Flag& flag = comm.flagged[l.rank];
    flag.function = function;
    flag.score = static_cast<double>(count) / n;
    ++open_stragglers_[comm.job];
    Emit(comm, function, static_cast<uint32_t>(l.rank), true, flag.score, wf, victim, count, out);
  }
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
