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
    const LinkEventLog* links) {
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
  return std::unique_ptr<UploadFanout>(new UploadFanout(std::move(uploaders)));
}

UploadFanout::~UploadFanout() {
  if (!shut_down_) Shutdown(absl::ZeroDuration());
}

void UploadFanout::OnSnapshot(const AgentSnapshot& snap) {
  for (const auto& up : uploaders_) up->OnSnapshot(snap);
}

void UploadFanout::EnqueueCollectives(v1::CollectiveBatch batch) {
  for (size_t i = 0; i + 1 < uploaders_.size(); ++i) uploaders_[i]->EnqueueCollectives(batch);
  uploaders_.back()->EnqueueCollectives(std::move(batch));
}

bool UploadFanout::Shutdown(absl::Duration flush_timeout) {
  shut_down_ = true;
  if (uploaders_.size() == 1) return uploaders_[0]->Shutdown(flush_timeout);
  std::vector<char> clean(uploaders_.size(), 0);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < uploaders_.size(); ++i) {
    threads.emplace_back([&, i] { clean[i] = uploaders_[i]->Shutdown(flush_timeout) ? 1 : 0; });
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
  for (const auto& up : uploaders_) {
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
