#include "daemon/aggregator/query/aggregator_json.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/common/json.h"
#include "google/protobuf/util/json_util.h"

namespace ringside::daemon {
namespace {

std::string ProtoJson(const google::protobuf::Message& m) {
  google::protobuf::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  o.always_print_primitive_fields = true;
  std::string out;
  if (!google::protobuf::util::MessageToJsonString(m, &out, o).ok()) return "null";
  return out;
}

std::string Float(float v) {
  if (!std::isfinite(v)) return "null";
  return absl::StrFormat("%.9g", v);
}

const char* Bool(bool b) { return b ? "true" : "false"; }

void AppendHead(const JournalEntry& e, absl::string_view kind, std::string* out) {
  absl::StrAppend(out, "{\"kind\":\"", kind, "\",\"node\":", JsonQuote(e.node),
                  ",\"agent_epoch\":\"", e.agent_epoch, "\",\"seq\":", e.seq,
                  ",\"received_unix_nanos\":", absl::ToUnixNanos(e.received));
}

}  // namespace

std::string SeriesJson(const std::string& node, const std::vector<analysis::SeriesView>& series) {
  std::string out = absl::StrCat("{\"node\":", JsonQuote(node), ",\"series\":[");
  bool first = true;
  for (const analysis::SeriesView& v : series) {
    if (!first) out += ",";
    first = false;
    const analysis::SeriesState& s = v.state;
    absl::StrAppend(&out, "{\"id\":", v.def.id, ",\"source\":", JsonQuote(v.def.source),
                    ",\"device\":", JsonQuote(v.def.device), ",\"port\":", JsonQuote(v.def.port),
                    ",\"counter\":", JsonQuote(v.def.counter), ",\"priority\":", v.def.priority,
                    ",\"unit\":", JsonQuote(v.def.unit), ",\"kind\":\"",
                    analysis::SeriesKindName(v.def.kind), "\",\"width\":", int(v.def.width),
                    ",\"term_width\":", int(v.def.term_width),
                    ",\"saturates\":", Bool(v.def.saturates),
                    ",\"has_value\":", Bool(s.has_value()), ",\"last_raw\":", s.last_raw,
                    ",\"last_time_unix_nanos\":", s.last_time_ns, ",\"last_step\":\"",
                    analysis::StepKindName(s.last_step), "\",\"steps\":", s.steps,
                    ",\"first_raw\":", v.first_raw,
                    ",\"first_time_unix_nanos\":", v.first_time_ns, ",\"total\":", s.total,
                    ",\"rates\":[");
    float w[analysis::kRateWindow];
    const int n = s.Window(w);
    for (int i = 0; i < n; ++i) absl::StrAppend(&out, i == 0 ? "" : ",", Float(w[i]));
    out += "]}";
  }
  out += "]}\n";
  return out;
}

std::string NodesJson(const std::vector<NodeStatus>& nodes) {
  std::string out = "{\"nodes\":[";
  bool first = true;
  for (const NodeStatus& n : nodes) {
    if (!first) out += ",";
    first = false;
    absl::StrAppend(&out, "{\"node\":", JsonQuote(n.node),
                    ",\"last_seen_unix_nanos\":", absl::ToUnixNanos(n.last_seen),
                    ",\"stale\":", Bool(n.stale), ",\"session_active\":", Bool(n.session_active),
                    ",\"current_epoch\":\"", n.current_epoch, "\",\"series\":", n.series,
                    ",\"collective_records\":", n.collective_records,
                    ",\"link_events\":", n.link_events, ",\"epochs\":[");
    for (size_t i = 0; i < n.epochs.size(); ++i) {
      absl::StrAppend(&out, i == 0 ? "" : ",", "{\"agent_epoch\":\"", n.epochs[i].agent_epoch,
                      "\",\"received_seq\":", n.epochs[i].received_seq,
                      ",\"acked_seq\":", n.epochs[i].acked_seq, "}");
    }
    out += "]}";
  }
  out += "]}\n";
  return out;
}

std::string CollectivesJson(const std::string& node, const std::vector<ReceivedCollective>& recs) {
  std::string out = absl::StrCat("{\"node\":", JsonQuote(node), ",\"records\":[");
  for (size_t i = 0; i < recs.size(); ++i) {
    absl::StrAppend(&out, i == 0 ? "" : ",",
                    "{\"received_unix_nanos\":", absl::ToUnixNanos(recs[i].received),
                    ",\"agent_epoch\":\"", recs[i].agent_epoch, "\",\"seq\":", recs[i].seq,
                    ",\"record\":", ProtoJson(recs[i].record), "}");
  }
  out += "]}\n";
  return out;
}

std::string LinkEventsJson(const std::string& node, const std::vector<ReceivedLinkEvent>& events) {
  std::string out = absl::StrCat("{\"node\":", JsonQuote(node), ",\"events\":[");
  for (size_t i = 0; i < events.size(); ++i) {
    absl::StrAppend(&out, i == 0 ? "" : ",",
                    "{\"received_unix_nanos\":", absl::ToUnixNanos(events[i].received),
                    ",\"agent_epoch\":\"", events[i].agent_epoch, "\",\"seq\":", events[i].seq,
                    ",\"event\":", ProtoJson(events[i].event), "}");
  }
  out += "]}\n";
  return out;
}

void AppendJournalEntryJsonLines(const JournalEntry& e, std::string* out) {
  if (e.message.has_collectives()) {
    // The batch's clock bound goes on each of its records' lines, so a line stands on its own.
    const std::string clock = e.message.collectives().has_clock()
                                  ? absl::StrCat(",\"clock\":",
                                                 ProtoJson(e.message.collectives().clock()))
                                  : std::string();
    for (const v1::CollectiveRecord& r : e.message.collectives().records()) {
      AppendHead(e, "collective", out);
      absl::StrAppend(out, clock, ",\"record\":", ProtoJson(r), "}\n");
    }
    if (e.message.collectives().dropped_by_job_size() > 0) {
      AppendHead(e, "plugin_drops", out);
      absl::StrAppend(out, ",\"dropped_by_job\":{");
      bool first = true;
      for (const auto& [job, count] : e.message.collectives().dropped_by_job()) {
        absl::StrAppend(out, first ? "" : ",", JsonQuote(job), ":", count);
        first = false;
      }
      absl::StrAppend(out, "}}\n");
    }
  } else if (e.message.has_link_events()) {
    for (const v1::LinkEvent& ev : e.message.link_events().events()) {
      AppendHead(e, "link_event", out);
      absl::StrAppend(out, ",\"event\":", ProtoJson(ev), "}\n");
    }
  }
}

absl::Status DumpJournalJson(const std::string& dir, std::ostream& out, JournalReadStats* stats) {
  std::vector<Watermark> marks;
  std::string buf;
  absl::Status s = ReadJournal(
      dir, nullptr,
      [&](const JournalEntry& e) {
        buf.clear();
        AppendJournalEntryJsonLines(e, &buf);
        out << buf;
      },
      &marks, stats);
  if (!s.ok()) return s;
  for (const Watermark& w : marks) {
    out << "{\"kind\":\"watermark\",\"node\":" << JsonQuote(w.node) << ",\"agent_epoch\":\""
        << w.agent_epoch << "\",\"seq\":" << w.seq << "}\n";
  }
  out.flush();
  return absl::OkStatus();
}

}  // namespace ringside::daemon
