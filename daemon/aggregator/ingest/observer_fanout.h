// One IngestObserver that hands every call to several (the analysis host, the /metrics
// trackers), in order. The aggregator takes one observer; main.cc builds the list.
#ifndef RINGSIDE_DAEMON_AGGREGATOR_INGEST_OBSERVER_FANOUT_H_
#define RINGSIDE_DAEMON_AGGREGATOR_INGEST_OBSERVER_FANOUT_H_

#include <vector>

#include "daemon/aggregator/ingest/ingest_core.h"

namespace ringside::daemon {

class ObserverFanout final : public IngestObserver {
 public:
  // Null entries are skipped; the observers must outlive the fan-out.
  explicit ObserverFanout(std::vector<IngestObserver*> observers) {
    for (IngestObserver* o : observers) {
      if (o != nullptr) observers_.push_back(o);
    }
  }
  bool empty() const { return observers_.empty(); }

  void OnSamples(absl::string_view node,
                 absl::Span<const analysis::ObservedSample> samples) override {
    for (IngestObserver* o : observers_) o->OnSamples(node, samples);
  }
  void OnCollectives(absl::string_view node, uint64_t agent_epoch, uint64_t seq,
                     absl::Time received, const v1::CollectiveBatch& batch) override {
    for (IngestObserver* o : observers_) o->OnCollectives(node, agent_epoch, seq, received, batch);
  }
  void OnLinkEvents(absl::string_view node, uint64_t agent_epoch, uint64_t seq, absl::Time received,
                    const v1::LinkEvents& events) override {
    for (IngestObserver* o : observers_) o->OnLinkEvents(node, agent_epoch, seq, received, events);
  }
  void OnInfo(absl::string_view node, const v1::SeriesDefs& defs) override {
    for (IngestObserver* o : observers_) o->OnInfo(node, defs);
  }
  void OnCountersElsewhere(absl::string_view node) override {
    for (IngestObserver* o : observers_) o->OnCountersElsewhere(node);
  }

 private:
  std::vector<IngestObserver*> observers_;
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_INGEST_OBSERVER_FANOUT_H_
