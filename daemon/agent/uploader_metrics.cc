// The uploader's self-metrics (ringside_agent_upload_*), from a stats snapshot. Help texts and
// types come from the agent's metric catalog.
#include <string>
#include <utility>
#include <vector>

#include "daemon/agent/metric_catalog.h"
#include "daemon/agent/uploader.h"
#include "prometheus/client_metric.h"

namespace ringside::daemon {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;

class Families {
 public:
  explicit Families(const std::string& node) : node_(node) {}

  void Add(absl::string_view name, double value, std::vector<ClientMetric::Label> extra = {}) {
    const MetricSpec& spec = AgentFamily(name);
    MetricFamily* f = nullptr;
    for (MetricFamily& existing : out_) {
      if (existing.name == spec.name) f = &existing;
    }
    if (f == nullptr) {
      out_.push_back(AgentMetricFamily(name));
      f = &out_.back();
    }
    ClientMetric m;
    m.label.push_back({"node", node_});
    for (auto& l : extra) m.label.push_back(std::move(l));
    if (spec.type == MetricType::kCounter) {
      m.counter.value = value;
    } else {
      m.gauge.value = value;
    }
    f->metric.push_back(std::move(m));
  }
  std::vector<MetricFamily> Take() { return std::move(out_); }

 private:
  const std::string& node_;
  std::vector<MetricFamily> out_;
};

double D(uint64_t v) { return static_cast<double>(v); }

}  // namespace

std::vector<prometheus::MetricFamily> UploaderStatsToFamilies(const UploaderStats& s,
                                                              const std::string& node) {
  Families f(node);
  f.Add("ringside_agent_upload_connected", s.connected ? 1 : 0);
  f.Add("ringside_agent_upload_sessions_total", D(s.sessions));
  f.Add("ringside_agent_upload_definitions_by_reference_total", D(s.defs_by_reference));
  f.Add("ringside_agent_upload_reconnects_total", D(s.reconnects));
  for (size_t k = 0; k < kSentKinds; ++k) {
    f.Add("ringside_agent_upload_messages_sent_total", D(s.sent[k]),
          {{"type", std::string(SentKindName(k))}});
  }
  for (size_t t = 0; t < kUploadTypes; ++t) {
    const std::string type(UploadTypeName(static_cast<UploadType>(t)));
    f.Add("ringside_agent_upload_messages_resent_total", D(s.resent[t]), {{"type", type}});
    f.Add("ringside_agent_upload_messages_enqueued_total", D(s.enqueued[t]), {{"type", type}});
    f.Add("ringside_agent_upload_dropped_total", D(s.dropped[t].messages), {{"type", type}});
    f.Add("ringside_agent_upload_dropped_records_total", D(s.dropped[t].records), {{"type", type}});
    f.Add("ringside_agent_upload_drop_pending_records", D(s.drop_pending[t].records),
          {{"type", type}});
    f.Add("ringside_agent_upload_drop_delivered_records_total", D(s.drop_delivered[t].records),
          {{"type", type}});
  }
  f.Add("ringside_agent_upload_sent_bytes_total", D(s.bytes_sent));
  f.Add("ringside_agent_upload_acked_seq", D(s.acked_seq));
  f.Add("ringside_agent_upload_sent_seq", D(s.last_seq));
  f.Add("ringside_agent_upload_buffer_bytes", D(s.buffer_bytes));
  f.Add("ringside_agent_upload_buffer_messages", D(s.buffer_messages));
  f.Add("ringside_agent_upload_buffer_capacity_bytes", D(s.buffer_capacity));
  f.Add("ringside_agent_upload_link_events_missed_total", D(s.link_events_missed));
  f.Add("ringside_agent_upload_series", D(s.series));
  for (const auto& [reason, e] : s.errors) {
    f.Add("ringside_agent_upload_session_ends_total", D(e.count), {{"reason", reason}});
    f.Add("ringside_agent_upload_last_session_end_timestamp_seconds",
          absl::ToDoubleSeconds(e.last - absl::UnixEpoch()), {{"reason", reason}});
  }
  return f.Take();
}

}  // namespace ringside::daemon
