#include "analysis/import/record_summary.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <tuple>
#include <utility>

namespace ringside::analysis {
namespace {

DurationStats Stats(std::vector<double>& ms) {
  DurationStats s;
  s.count = static_cast<int64_t>(ms.size());
  if (ms.empty()) return s;
  std::sort(ms.begin(), ms.end());
  auto at = [&ms](double q) {
    size_t i = static_cast<size_t>(q * static_cast<double>(ms.size() - 1) + 0.5);
    return ms[std::min(i, ms.size() - 1)];
  };
  s.p50_ms = at(0.5);
  s.p95_ms = at(0.95);
  s.max_ms = ms.back();
  return s;
}

// "rank2-dp0" < "rank10-dp0": digit runs compare as numbers.
bool NaturalLess(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) &&
        std::isdigit(static_cast<unsigned char>(b[j]))) {
      size_t i2 = i, j2 = j;
      while (i2 < a.size() && std::isdigit(static_cast<unsigned char>(a[i2]))) ++i2;
      while (j2 < b.size() && std::isdigit(static_cast<unsigned char>(b[j2]))) ++j2;
      std::string na = a.substr(i, i2 - i), nb = b.substr(j, j2 - j);
      na.erase(0, std::min(na.find_first_not_of('0'), na.size()));
      nb.erase(0, std::min(nb.find_first_not_of('0'), nb.size()));
      if (na.size() != nb.size()) return na.size() < nb.size();
      if (na != nb) return na < nb;
      i = i2;
      j = j2;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

}  // namespace

RecordSummary Summarize(const std::vector<ringside::v1::CollectiveRecord>& records) {
  RecordSummary out;
  out.records = static_cast<int64_t>(records.size());
  std::set<std::string> jobs;
  struct Fn {
    int64_t records = 0, incomplete = 0;
    std::set<std::tuple<std::string, uint64_t, uint64_t>> instances;
    std::vector<double> ms;
  };
  std::map<std::string, Fn> fns;
  struct Comm {
    uint32_t nranks = 0;
    std::set<uint32_t> ranks;
    int64_t records = 0;
    std::set<std::string> functions;
  };
  std::map<std::pair<std::string, std::string>, Comm> comms;
  struct Worker {
    int64_t records = 0;
    std::map<std::string, std::vector<double>> ms;
  };
  std::map<std::string, Worker> workers;
  for (const auto& r : records) {
    jobs.insert(r.job_id());
    Fn& f = fns[r.function()];
    ++f.records;
    f.instances.emplace(r.job_id(), r.comm_id(), r.seq());
    Comm& c = comms[{r.job_id(), r.comm_name()}];
    c.nranks = std::max(c.nranks, r.nranks());
    c.ranks.insert(r.rank());
    ++c.records;
    c.functions.insert(r.function());
    Worker& w = workers[r.host()];
    ++w.records;
    const int64_t start =
        r.kernel_start_unix_nanos() != 0 ? r.kernel_start_unix_nanos() : r.enqueue_unix_nanos();
    if (start != 0 && (out.first_start_unix_nanos == 0 || start < out.first_start_unix_nanos)) {
      out.first_start_unix_nanos = start;
    }
    out.last_stop_unix_nanos = std::max(out.last_stop_unix_nanos, r.kernel_stop_unix_nanos());
    if (r.kernel_stop_unix_nanos() == 0) {
      ++f.incomplete;
      continue;
    }
    if (r.kernel_start_unix_nanos() == 0) continue;
    double ms = static_cast<double>(r.kernel_stop_unix_nanos() - r.kernel_start_unix_nanos()) / 1e6;
    f.ms.push_back(ms);
    w.ms[r.function()].push_back(ms);
  }
  out.jobs.assign(jobs.begin(), jobs.end());
  for (auto& [name, f] : fns) {
    FunctionSummary s;
    s.function = name;
    s.records = f.records;
    s.instances = static_cast<int64_t>(f.instances.size());
    s.incomplete = f.incomplete;
    s.duration = Stats(f.ms);
    out.functions.push_back(std::move(s));
  }
  for (auto& [key, c] : comms) {
    CommSummary s;
    s.job_id = key.first;
    s.comm_name = key.second;
    s.nranks = c.nranks;
    s.ranks_seen = static_cast<int64_t>(c.ranks.size());
    s.records = c.records;
    s.functions.assign(c.functions.begin(), c.functions.end());
    out.comms.push_back(std::move(s));
  }
  std::sort(out.comms.begin(), out.comms.end(), [](const CommSummary& a, const CommSummary& b) {
    if (a.job_id != b.job_id) return a.job_id < b.job_id;
    return NaturalLess(a.comm_name, b.comm_name);
  });
  for (auto& [host, w] : workers) {
    WorkerSummary s;
    s.host = host;
    s.records = w.records;
    for (auto& [fn, ms] : w.ms) s.by_function[fn] = Stats(ms);
    out.workers.push_back(std::move(s));
  }
  std::sort(
      out.workers.begin(), out.workers.end(),
      [](const WorkerSummary& a, const WorkerSummary& b) { return NaturalLess(a.host, b.host); });
  return out;
}

}  // namespace ringside::analysis
