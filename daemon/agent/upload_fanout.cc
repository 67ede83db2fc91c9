#include "daemon/agent/upload_fanout.h"

#include <set>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ringside::daemon {

absl::StatusOr<std::vector<std::string>> ParseAggregatorList(absl::string_view list) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (absl::string_view part : absl::StrSplit(list, ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (part.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("empty address in \"", list, "\" (want host:port[,host:port...])"));
    }
    if (!seen.insert(std::string(part)).second) {
      return absl::InvalidArgumentError(absl::StrCat("\"", part, "\" is listed twice"));
    }
    out.emplace_back(part);
  }
  return out;
}

absl::StatusOr<std::unique_ptr<UploadFanout>> UploadFanout::Create(
    const UploaderOptions& base, const std::vector<std::string>& targets,
    const LinkEventLog* links, JobReplicas job_replicas) {
  if (targets.empty()) return absl::InvalidArgumentError("no aggregator address");
  std::vector<std::unique_ptr<Uploader>> uploaders;
  for (const std::string& target : targets) {
    UploaderOptions o = base;
    o.target = target;
    o.agent_epoch = 0;  // each replica its own epoch: its sequence numbers are its own
    absl::StatusOr<std::unique_ptr<Uploader>> up = Uploader::Create(std::move(o), links);
    if (!up.ok()) {
      return absl::Status(up.status().code(), absl::StrCat(target, ": ", up.status().message()));
    }
    uploaders.push_back(*std::move(up));
  }
  return std::unique_ptr<UploadFanout>(
      new UploadFanout(base, std::move(uploaders), std::move(job_replicas)));
}

Uploader* UploadFanout::ForTarget(const std::string& target) {
  for (const auto& up : uploaders_) {
    if (up->options().target == target) return up.get();
  }
  absl::MutexLock l(&mu_);
  auto it = job_uploaders_.find(target);
  if (it != job_uploaders_.end()) return it->second.get();
  if (shut_down_) return nullptr;
  UploaderOptions o = base_;
  o.target = target;
  o.agent_epoch = 0;
  o.capabilities = {"collectives"};  // this node's counters go to its own shard
  absl::StatusOr<std::unique_ptr<Uploader>> up = Uploader::Create(std::move(o), nullptr);
  if (!up.ok()) {
    if (base_.log) base_.log(absl::StrCat("collective records for ", target, ": ", up.status().ToString()));
    return nullptr;
  }
  Uploader* raw = up->get();
  job_uploaders_.emplace(target, *std::move(up));
  return raw;
}

std::vector<Uploader*> UploadFanout::All() const {
  std::vector<Uploader*> out;
  for (const auto& up : uploaders_) out.push_back(up.get());
  absl::MutexLock l(&mu_);
  for (const auto& [target, up] : job_uploaders_) out.push_back(up.get());
  return out;
}

std::vector<std::string> UploadFanout::JobTargets() const {
  absl::MutexLock l(&mu_);
  std::vector<std::string> out;
  for (const auto& [target, up] : job_uploaders_) out.push_back(target);
  return out;
}

UploadFanout::~UploadFanout() { Shutdown(absl::ZeroDuration()); }

void UploadFanout::OnSnapshot(const AgentSnapshot& snap) {
  for (const auto& up : uploaders_) up->OnSnapshot(snap);
}

void UploadFanout::EnqueueCollectives(v1::CollectiveBatch batch) {
  if (!job_replicas_) {
    for (size_t i = 0; i + 1 < uploaders_.size(); ++i) uploaders_[i]->EnqueueCollectives(batch);
    uploaders_.back()->EnqueueCollectives(std::move(batch));
    return;
  }
  // Split by the shard of each record's job: one batch per target replica.
  std::map<std::string, std::vector<std::string>> targets_of;  // job → replicas
  std::map<std::string, v1::CollectiveBatch> by_target;
  for (v1::CollectiveRecord& r : *batch.mutable_records()) {
    auto it = targets_of.find(r.job_id());
    if (it == targets_of.end()) it = targets_of.emplace(r.job_id(), job_replicas_(r.job_id())).first;
    for (const std::string& t : it->second) *by_target[t].add_records() = r;
  }
  for (const auto& [job, dropped] : batch.dropped_by_job()) {
    auto it = targets_of.find(job);
    if (it == targets_of.end()) it = targets_of.emplace(job, job_replicas_(job)).first;
    for (const std::string& t : it->second) (*by_target[t].mutable_dropped_by_job())[job] = dropped;
  }
  for (auto& [target, b] : by_target) {
    if (Uploader* up = ForTarget(target)) up->EnqueueCollectives(std::move(b));
  }
}

bool UploadFanout::Shutdown(absl::Duration flush_timeout) {
  {
    absl::MutexLock l(&mu_);
    if (shut_down_) return true;
    shut_down_ = true;  // no new collectives-only uploader from now on
  }
  const std::vector<Uploader*> all = All();
  if (all.size() == 1) return all[0]->Shutdown(flush_timeout);
  std::vector<char> clean(all.size(), 0);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < all.size(); ++i) {
    threads.emplace_back([&, i] { clean[i] = all[i]->Shutdown(flush_timeout) ? 1 : 0; });
  }
  for (std::thread& t : threads) t.join();
  for (char c : clean) {
    if (!c) return false;
  }
  return true;
}

bool UploadFanout::AnyConnected() const {
  for (const auto& up : uploaders_) {
    if (up->Stats().connected) return true;
  }
  return false;
}

std::vector<prometheus::MetricFamily> UploadFanout::MetricFamilies() const {
  std::vector<prometheus::MetricFamily> out;
  for (const Uploader* up : All()) {
    for (prometheus::MetricFamily& f : up->MetricFamilies()) {
      for (prometheus::ClientMetric& m : f.metric) {
        m.label.push_back({"aggregator", up->options().target});
      }
      prometheus::MetricFamily* into = nullptr;
      for (prometheus::MetricFamily& have : out) {
        if (have.name == f.name) into = &have;
      }
      if (into == nullptr) {
        out.push_back(std::move(f));
      } else {
        for (prometheus::ClientMetric& m : f.metric) into->metric.push_back(std::move(m));
      }
    }
  }
  return out;
}

}  // namespace ringside::daemon
