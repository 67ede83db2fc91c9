#include "daemon/agent/render.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analysis/counter_math.h"
#include "daemon/common/json.h"

namespace ringside::daemon {
namespace {

// Width-aware delta, and for a sum of wrapping counters (SeriesDef::term_width: mlx5 hw_counters)
// a drop of about 2^term_width read as one term wrapping rather than a reset.
analysis::Delta SeriesDelta(const collectors::SeriesDef& def, uint64_t prev, uint64_t cur) {
  return analysis::ComputeDelta(prev, cur, def.width, def.saturates, def.term_width);
}

using collectors::SeriesDef;
using collectors::SeriesKind;
using collectors::Value;
using collectors::ValueStatus;

absl::string_view StatusName(ValueStatus s) {
  switch (s) {
    case ValueStatus::kOk:
      return "ok";
    case ValueStatus::kUnavailable:
      return "unavailable";
    case ValueStatus::kError:
      return "error";
    case ValueStatus::kStale:
      return "stale";
  }
  return "unknown";
}

template <typename Fn>
void ForEachSeries(const AgentSnapshot& snap, Fn fn) {
  for (const collectors::CollectorSnapshot& cs : snap.collectors) {
    if (!cs.table) continue;
    for (size_t i = 0; i < cs.table->defs.size() && i < cs.values.size(); ++i) {
      fn(cs.table->defs[i], cs.values[i]);
    }
  }
}

// Rates in a unit people read: bytes for 4-byte words.
std::string HumanRate(double per_second, collectors::Unit unit) {
  std::string suffix = "/s";
  if (unit == collectors::Unit::kFourByteWords || unit == collectors::Unit::kBytes) {
    if (unit == collectors::Unit::kFourByteWords) per_second *= 4;
    const char* units[] = {"B/s", "KB/s", "MB/s", "GB/s", "TB/s"};
    int u = 0;
    while (per_second >= 1000 && u < 4) {
      per_second /= 1000;
      ++u;
    }
    return absl::StrFormat("%.1f %s", per_second, units[u]);
  }
  if (unit == collectors::Unit::kMicroseconds) {
    return absl::StrFormat("%.1f %% paused", per_second / 1e4);
  }
  return absl::StrFormat("%.1f%s", per_second, suffix);
}

}  // namespace

std::string RenderJson(const AgentSnapshot& snap) {
  std::string out = "[";
  bool first = true;
  ForEachSeries(snap, [&](const SeriesDef& def, const Value& v) {
    absl::StrAppend(
        &out, first ? "\n" : ",\n", "{\"node\":", JsonQuote(snap.node),
        ",\"source\":", JsonQuote(def.source), ",\"device\":", JsonQuote(def.device),
        ",\"port\":", JsonQuote(def.port), ",\"counter\":", JsonQuote(def.counter), ",\"kind\":\"",
        collectors::KindName(def.kind), "\",\"value\":",
        v.status == ValueStatus::kOk || v.status == ValueStatus::kStale ? absl::StrCat(v.raw)
                                                                        : "null",
        ",\"status\":\"", StatusName(v.status), "\",\"unit\":\"", collectors::UnitName(def.unit),
        "\",\"width\":", def.width, ",\"saturates\":", def.saturates ? "true" : "false", "}");
    first = false;
  });
  absl::StrAppend(&out, first ? "]\n" : "\n]\n");
  return out;
}

std::string RenderText(const AgentSnapshot& snap) {
  std::string out = absl::StrFormat("%-16s %-10s %-4s %-34s %20s  %-16s %s\n", "SOURCE", "DEVICE",
                                    "PORT", "COUNTER", "VALUE", "UNIT", "WIDTH");
  ForEachSeries(snap, [&](const SeriesDef& def, const Value& v) {
    std::string value = v.status == ValueStatus::kOk || v.status == ValueStatus::kStale
                            ? absl::StrCat(v.raw)
                            : std::string(StatusName(v.status));
    absl::StrAppend(&out, absl::StrFormat("%-16s %-10s %-4s %-34s %20s  %-16s %d\n", def.source,
                                          def.device, def.port.empty() ? "-" : def.port,
                                          def.counter, value, collectors::UnitName(def.unit),
                                          def.width));
  });
  return out;
}

std::string RatePrinter::Render(const AgentSnapshot& snap) {
  struct Line {
    bool traffic;
    double rate;
    std::string text;
  };
  std::vector<Line> lines;
  std::vector<std::string> events;
  ForEachSeries(snap, [&](const SeriesDef& def, const Value& v) {
    if (v.status != ValueStatus::kOk) return;
    Key key{def.source, def.device, def.port, def.counter};
    auto it = last_.find(key);
    if (it == last_.end()) {
      last_.emplace(key, Last{v.raw, snap.timestamp});
      return;
    }
    const Last prev = it->second;
    it->second = Last{v.raw, snap.timestamp};
    std::string where = def.port.empty() ? def.device : absl::StrCat(def.device, "/", def.port);
    if (def.kind == SeriesKind::kState) {
      if (prev.raw != v.raw) {
        events.push_back(absl::StrFormat("  ! %-14s %-34s changed %d -> %d", where, def.counter,
                                         prev.raw, v.raw));
      }
      return;
    }
    if (def.kind != SeriesKind::kCounter) return;
    const double secs = absl::ToDoubleSeconds(snap.timestamp - prev.at);
    if (secs <= 0) return;
    analysis::Delta d = SeriesDelta(def, prev.raw, v.raw);
    if (d.kind == analysis::DeltaKind::kReset || d.kind == analysis::DeltaKind::kInvalid) {
      events.push_back(absl::StrFormat("  ! %-14s %-34s %s (%d -> %d)", where, def.counter,
                                       analysis::DeltaKindName(d.kind), prev.raw, v.raw));
      return;
    }
    if (d.kind == analysis::DeltaKind::kSaturated && prev.raw != v.raw) {
      events.push_back(absl::StrFormat("  ! %-14s %-34s saturated at %d (%d-bit)", where,
                                       def.counter, v.raw, def.width));
    }
    if (d.value == 0) return;
    const double rate = static_cast<double>(d.value) / secs;
    // Errors and congestion signals first, traffic after: the lines on-call looks for.
    const bool traffic = def.unit == collectors::Unit::kBytes ||
                         def.unit == collectors::Unit::kFourByteWords ||
                         (absl::StrContains(def.counter, "packets") &&
                          !absl::StrContains(def.counter, "ecn") &&
                          !absl::StrContains(def.counter, "cnp"));
    std::string note = d.kind == analysis::DeltaKind::kWrap ? " (wrapped)" : "";
    lines.push_back(Line{traffic, rate, absl::StrFormat("    %-14s %-34s %18s%s", where, def.counter,
                                               HumanRate(rate, def.unit), note)});
  });
  if (lines.empty() && events.empty()) return "";
  std::sort(lines.begin(), lines.end(),
            [](const Line& a, const Line& b) {
              return a.traffic != b.traffic ? !a.traffic : a.rate > b.rate;
            });
  std::string out = absl::StrCat(absl::FormatTime("%H:%M:%S", snap.timestamp, absl::LocalTimeZone()),
                                 "  ", snap.node, "  ", lines.size(), " counters moving\n");
  for (const std::string& e : events) absl::StrAppend(&out, e, "\n");
  for (size_t i = 0; i < lines.size() && i < max_lines_; ++i) {
    absl::StrAppend(&out, lines[i].text, "\n");
  }
  if (lines.size() > max_lines_) {
    absl::StrAppend(&out, "    ... ", lines.size() - max_lines_, " more\n");
  }
  return out;
}

}  // namespace ringside::daemon
