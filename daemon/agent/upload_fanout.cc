#include "daemon/agent/upload_fanout.h"

#include <algorithm>
#include <map>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "daemon/common/log.h"

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

absl::StatusOr<std::shared_ptr<Uploader>> UploadFanout::MakeNodeUploader(
    const UploaderOptions& base, const std::string& target, const LinkEventLog* links,
    size_t replicas, Gate gate) {
  UploaderOptions o = base;
  o.target = target;
  if (replicas >= 2) o.capabilities.push_back(absl::StrCat("replicas=", replicas));
  o.agent_epoch = 0;  // each replica its own epoch: its sequence numbers are its own
  if (gate != nullptr) o.may_open_session = [gate] { return gate->load(); };
  absl::StatusOr<std::unique_ptr<Uploader>> up = Uploader::Create(std::move(o), links);
  if (!up.ok()) {
    return absl::Status(up.status().code(), absl::StrCat(target, ": ", up.status().message()));
  }
  return std::shared_ptr<Uploader>(*std::move(up));
}

absl::StatusOr<std::unique_ptr<UploadFanout>> UploadFanout::Create(
    const UploaderOptions& base_in, const std::vector<std::string>& targets,
    const LinkEventLog* links, JobReplicas job_replicas) {
  if (targets.empty()) return absl::InvalidArgumentError("no aggregator address");
  UploaderOptions base = base_in;
  if (!base.log) base.log = [](const std::string& m) { LogLine(m); };
  std::vector<std::shared_ptr<Uploader>> uploaders;
  for (const std::string& target : targets) {
    absl::StatusOr<std::shared_ptr<Uploader>> up =
        MakeNodeUploader(base, target, links, targets.size());
    if (!up.ok()) return up.status();
    uploaders.push_back(*std::move(up));
  }
  return std::unique_ptr<UploadFanout>(
      new UploadFanout(base, links, std::move(uploaders), std::move(job_replicas)));
}

std::shared_ptr<Uploader> UploadFanout::ForTarget(const std::string& target) {
  absl::MutexLock l(&mu_);
  for (const auto& up : uploaders_) {
    if (up->options().target == target) return up;
  }
  for (const Retiree& r : retiring_) {
    if (r.target == target && !r.done) return r.uploader;
  }
  auto it = job_uploaders_.find(target);
  if (it != job_uploaders_.end()) return it->second;
  if (shut_down_) return nullptr;
  UploaderOptions o = base_;
  o.target = target;
  o.agent_epoch = 0;
  o.capabilities = {"collectives"};  // this node's counters go to its own shard
  absl::StatusOr<std::unique_ptr<Uploader>> up = Uploader::Create(std::move(o), nullptr);
  if (!up.ok()) {
    base_.log(absl::StrCat("collective records for ", target, ": ", up.status().ToString()));
    return nullptr;
  }
  std::shared_ptr<Uploader> made(*std::move(up));
  job_uploaders_.emplace(target, made);
  return made;
}

std::vector<std::shared_ptr<Uploader>> UploadFanout::Nodes() const {
  absl::MutexLock l(&mu_);
  return uploaders_;
}

std::vector<std::shared_ptr<Uploader>> UploadFanout::All() const {
  absl::MutexLock l(&mu_);
  std::vector<std::shared_ptr<Uploader>> out = uploaders_;
  for (const auto& [target, up] : job_uploaders_) out.push_back(up);
  return out;
}

size_t UploadFanout::size() const {
  absl::MutexLock l(&mu_);
  return uploaders_.size();
}

std::shared_ptr<const Uploader> UploadFanout::replica(size_t i) const {
  absl::MutexLock l(&mu_);
  return i < uploaders_.size() ? uploaders_[i] : nullptr;
}

std::vector<std::string> UploadFanout::Targets() const {
  absl::MutexLock l(&mu_);
  std::vector<std::string> out;
  for (const auto& up : uploaders_) out.push_back(up->options().target);
  return out;
}

std::vector<std::string> UploadFanout::JobTargets() const {
  absl::MutexLock l(&mu_);
  std::vector<std::string> out;
  for (const auto& [target, up] : job_uploaders_) out.push_back(target);
  return out;
}

size_t UploadFanout::Retiring() const {
  absl::MutexLock l(&mu_);
  size_t n = 0;
  for (const Retiree& r : retiring_) n += r.done ? 0 : 1;
  return n;
}

UploadFanout::~UploadFanout() { Shutdown(absl::ZeroDuration()); }

void UploadFanout::OnSnapshot(const AgentSnapshot& snap) {
  for (const auto& up : Nodes()) up->OnSnapshot(snap);
}

void UploadFanout::EnqueueCollectives(v1::CollectiveBatch batch) {
  if (!job_replicas_) {
    const std::vector<std::shared_ptr<Uploader>> nodes = Nodes();
    for (size_t i = 0; i + 1 < nodes.size(); ++i) nodes[i]->EnqueueCollectives(batch);
    nodes.back()->EnqueueCollectives(std::move(batch));
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
    if (std::shared_ptr<Uploader> up = ForTarget(target)) up->EnqueueCollectives(std::move(b));
  }
}

void UploadFanout::RetireLocked(std::string target, std::shared_ptr<Uploader> up,
                                absl::Duration flush_timeout, Gate gate) {
  Retiree& r = retiring_.emplace_back();
  r.target = std::move(target);
  r.uploader = std::move(up);
  Retiree* raw = &r;  // list elements stay put
  r.thread = std::thread([this, raw, flush_timeout, gate] {
    const bool clean = raw->uploader->Shutdown(flush_timeout);
    if (gate != nullptr) gate->store(true);  // its session is closed: the node's may open
    base_.log(absl::StrCat("upload to ", raw->target, " retired (the node moved to another shard)",
                           clean ? ", everything acknowledged" : ", not everything acknowledged"));
    bool tell = false;
    {
      absl::MutexLock l(&mu_);
      raw->done = true;
      tell = !shut_down_ && std::none_of(uploaders_.begin(), uploaders_.end(), [&](const auto& u) {
        return u->options().target == raw->target;
      });
    }
    // The old shard learns that the node's counters went elsewhere: a session that offers only
    // collectives (its Hello makes the node collectives-only there, so it is not judged stale),
    // which also carries the records of jobs placed on that shard.
    if (tell) ForTarget(raw->target);
  });
}

void UploadFanout::JoinRetired(bool all) {
  std::list<Retiree> finished;
  {
    absl::MutexLock l(&mu_);
    for (auto it = retiring_.begin(); it != retiring_.end();) {
      if (all || it->done) {
        auto next = std::next(it);
        finished.splice(finished.end(), retiring_, it);
        it = next;
      } else {
        ++it;
      }
    }
  }
  // Outside the lock: a thread that is not done yet takes mu_ to say so.
  for (Retiree& r : finished) {
    if (r.thread.joinable()) r.thread.join();
  }
}

absl::Status UploadFanout::MoveNodeTo(const std::vector<std::string>& targets,
                                      absl::Duration flush_timeout) {
  if (targets.empty()) return absl::InvalidArgumentError("no aggregator address");
  JoinRetired(false);
  const std::vector<std::shared_ptr<Uploader>> old = Nodes();
  std::vector<std::string> had_jobs = JobTargets();
  // Made outside the lock (Create builds a channel and starts a thread). A new replica that has
  // the node's collectives-only session gets an uploader held back until that session closed:
  // two sessions of one node replace each other at the aggregator.
  std::vector<std::shared_ptr<Uploader>> next;
  std::map<std::string, Gate> gates;
  for (const std::string& target : targets) {
    std::shared_ptr<Uploader> keep;
    for (const auto& up : old) {
      if (up->options().target == target) keep = up;
    }
    if (!keep) {
      Gate gate;
      if (std::binary_search(had_jobs.begin(), had_jobs.end(), target)) {
        gate = gates[target] = std::make_shared<std::atomic<bool>>(false);
      }
      absl::StatusOr<std::shared_ptr<Uploader>> made =
          MakeNodeUploader(base_, target, links_, targets.size(), gate);
      if (!made.ok()) {
        for (auto& [t, g] : gates) g->store(true);
        return made.status();
      }
      keep = *std::move(made);
    }
    next.push_back(std::move(keep));
  }
  absl::MutexLock l(&mu_);
  if (shut_down_) {
    for (auto& [t, g] : gates) g->store(true);
    return absl::FailedPreconditionError("upload stopped");
  }
  for (const auto& up : uploaders_) {
    if (std::find(next.begin(), next.end(), up) == next.end()) {
      RetireLocked(up->options().target, up, flush_timeout);
    }
  }
  for (const auto& up : next) {
    const std::string& target = up->options().target;
    auto gate = gates.find(target);
    auto it = job_uploaders_.find(target);
    if (it == job_uploaders_.end()) {
      if (gate != gates.end()) gate->second->store(true);  // nothing to wait for after all
      continue;
    }
    RetireLocked(it->first, std::move(it->second), flush_timeout,
                 gate != gates.end() ? gate->second : nullptr);
    job_uploaders_.erase(it);
  }
  uploaders_ = std::move(next);
  return absl::OkStatus();
}

bool UploadFanout::Shutdown(absl::Duration flush_timeout) {
  {
    absl::MutexLock l(&mu_);
    if (shut_down_) return true;
    shut_down_ = true;  // no new collectives-only uploader from now on
  }
  const std::vector<std::shared_ptr<Uploader>> all = All();
  bool clean_all = true;
  if (all.size() == 1) {
    clean_all = all[0]->Shutdown(flush_timeout);
  } else {
    std::vector<char> clean(all.size(), 0);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < all.size(); ++i) {
      threads.emplace_back([&, i] { clean[i] = all[i]->Shutdown(flush_timeout) ? 1 : 0; });
    }
    for (std::thread& t : threads) t.join();
    for (char c : clean) clean_all = clean_all && c != 0;
  }
  JoinRetired(true);
  return clean_all;
}

bool UploadFanout::AnyConnected() const {
  for (const auto& up : Nodes()) {
    if (up->Stats().connected) return true;
  }
  return false;
}

std::vector<prometheus::MetricFamily> UploadFanout::MetricFamilies() const {
  std::vector<prometheus::MetricFamily> out;
  for (const auto& up : All()) {
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
