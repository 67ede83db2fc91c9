// ringside-fabric-scan: runs the fabric-scan collector (collectors/ibmad) once or repeatedly and
// prints every series, node and link transition. For checking the scan against perfquery, and
// for running it against ibsim (under `ibsim-run`, which LD_PRELOADs libumad2sim).
//
//   ringside-fabric-scan [options] TARGET...
//     TARGET             LID[:PORTS], e.g. 3, 3:1, 18:1,9-12, 105:all; ';' separates several
//     --ca=NAME          local CA (default: the first)
//     --ca-port=N        local CA port (default: the first active)
//     --timeout-ms=N     per MAD attempt (default 200)
//     --retries=N        extra attempts per MAD (default 1)
//     --basic            32-bit PortCounters data counters even where extended ones exist
//     --scans=N          scans to run (default 1; 0: until SIGINT/SIGTERM)
//     --interval-ms=N    between scan starts (default 1000)
//     --format=text|json text (default): one line per item; json: one object per scan and line
//
//   ringside-fabric-scan --discover [options]
//     walks the subnet from the local port with directed-route SMPs (subnet_discovery.h) and
//     prints its graph once per pass (--scans passes, --interval-ms apart)
//     --rate=N           SMPs per second at most (default 500; 0: unpaced)
//     --max-duration-ms=N a pass gives up after this long (default 60000)
//     --format=text|json|ibnetdiscover  ibnetdiscover: the graph as `ibnetdiscover` prints it
//   Text output per pass: "discovery N time=... duration_ms=... mads=M errors=E cpu_ms=C
//   complete=0|1 nodes=N links=L", then "node ...", "port ...", "link ..." and "error ..."
//   lines, then "end N". The counts and CPU time go to stderr with --format=ibnetdiscover.
//   Exit status: 0; 1 when the last pass had failed SMPs or was incomplete; 2 as for a scan.
//
// Text output, per scan: "scan N time=... duration_ms=... errors=E", then "node ...",
// "value ...", "event ..." and "error ..." lines, then "end N". Exit status: 0; 1 when the last
// scan had read errors; 2 on bad usage or when no local CA port could be opened.
#include <signal.h>
#include <sys/resource.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "collectors/ibmad/ibmad_collector.h"
#include "collectors/ibmad/subnet_discovery.h"
#include "collectors/ibmad/subnet_graph.h"

namespace {

using ringside::collectors::CollectorSnapshot;
using ringside::collectors::CycleErrors;
using ringside::collectors::IbmadCollector;
using ringside::collectors::IbmadOptions;
using ringside::collectors::InfoRecord;
using ringside::collectors::KindName;
using ringside::collectors::LinkEvent;
using ringside::collectors::LinkStateName;
using ringside::collectors::SeriesDef;
using ringside::collectors::UnitName;
using ringside::collectors::Value;
using ringside::collectors::ValueStatus;

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

constexpr char kUsage[] =
    "usage: ringside-fabric-scan [--ca=NAME] [--ca-port=N] [--timeout-ms=N] [--retries=N]\n"
    "         [--basic] [--scans=N] [--interval-ms=N] [--format=text|json] LID[:PORTS]...\n"
    "       ringside-fabric-scan --discover [--ca=NAME] [--ca-port=N] [--timeout-ms=N]\n"
    "         [--retries=N] [--rate=N] [--max-duration-ms=N] [--scans=N] [--interval-ms=N]\n"
    "         [--format=text|json|ibnetdiscover]\n";

struct Args {
  IbmadOptions options;
  int scans = 1;
  int64_t interval_ms = 1000;
  bool json = false;
  bool discover = false;
  bool ibnetdiscover = false;
  ringside::collectors::DiscoveryOptions discovery;
};

bool ParseInt(absl::string_view text, int64_t min, int64_t* out) {
  return absl::SimpleAtoi(text, out) && *out >= min;
}

bool ParseArgs(int argc, char** argv, Args& args, std::string& error) {
  std::string targets;
  for (int i = 1; i < argc; ++i) {
    absl::string_view a = argv[i];
    int64_t n = 0;
    auto value = [&](absl::string_view flag, absl::string_view* v) {
      if (!absl::StartsWith(a, flag)) return false;
      *v = a.substr(flag.size());
      return true;
    };
    absl::string_view v;
    if (value("--ca=", &v)) {
      args.options.port.ca_name = std::string(v);
    } else if (value("--ca-port=", &v)) {
      if (!ParseInt(v, 0, &n)) return error = absl::StrCat("bad ", a), false;
      args.options.port.ca_port = static_cast<int>(n);
    } else if (value("--timeout-ms=", &v)) {
      if (!ParseInt(v, 1, &n)) return error = absl::StrCat("bad ", a), false;
      args.options.port.timeout = absl::Milliseconds(n);
    } else if (value("--retries=", &v)) {
      if (!ParseInt(v, 0, &n)) return error = absl::StrCat("bad ", a), false;
      args.options.port.retries = static_cast<int>(n);
    } else if (a == "--basic") {
      args.options.use_extended = false;
    } else if (value("--scans=", &v)) {
      if (!ParseInt(v, 0, &n)) return error = absl::StrCat("bad ", a), false;
      args.scans = static_cast<int>(n);
    } else if (value("--interval-ms=", &v)) {
      if (!ParseInt(v, 0, &n)) return error = absl::StrCat("bad ", a), false;
      args.interval_ms = n;
    } else if (value("--format=", &v)) {
      if (v != "text" && v != "json" && v != "ibnetdiscover") {
        return error = absl::StrCat("bad ", a), false;
      }
      args.json = v == "json";
      args.ibnetdiscover = v == "ibnetdiscover";
    } else if (a == "--discover") {
      args.discover = true;
    } else if (value("--rate=", &v)) {
      double rate = 0;
      if (!absl::SimpleAtod(v, &rate) || rate < 0) return error = absl::StrCat("bad ", a), false;
      args.discovery.max_mads_per_second = rate;
    } else if (value("--max-duration-ms=", &v)) {
      if (!ParseInt(v, 1, &n)) return error = absl::StrCat("bad ", a), false;
      args.discovery.max_duration = absl::Milliseconds(n);
    } else if (absl::StartsWith(a, "-")) {
      return error = absl::StrCat("unknown option ", a), false;
    } else {
      absl::StrAppend(&targets, ";", a);
    }
  }
  if (args.discover) {
    if (!targets.empty()) return error = "--discover takes no targets", false;
    return true;
  }
  if (args.ibnetdiscover) return error = "--format=ibnetdiscover needs --discover", false;
  auto parsed = ringside::collectors::ParseScanTargets(targets);
  if (!parsed.ok()) return error = std::string(parsed.status().message()), false;
  if (parsed->empty()) return error = "no targets", false;
  args.options.targets = *std::move(parsed);
  // A one-shot tool: discovery is retried at every scan, never rate-limited.
  args.options.retry_interval = absl::ZeroDuration();
  return true;
}

// A JSON string literal; also used for quoted text fields.
std::string Quote(absl::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c < 0x20 || c >= 0x7f) {
      absl::StrAppendFormat(&out, "\\u%04x", c);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  out.push_back('"');
  return out;
}

absl::string_view StatusName(ValueStatus s) {
  switch (s) {
    case ValueStatus::kOk:
      return "ok";
    case ValueStatus::kUnavailable:
      return "unavailable";
    case ValueStatus::kError:
      return "error";
  }
  return "?";
}

std::string TimeText(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t, absl::UTCTimeZone());
}

void PrintText(int scan, const CollectorSnapshot& snap, const CycleErrors& errors,
               const std::vector<LinkEvent>& events) {
  std::string out =
      absl::StrFormat("scan %d time=%s duration_ms=%d errors=%d\n", scan, TimeText(snap.timestamp),
                      absl::ToInt64Milliseconds(snap.duration), errors.count);
  for (const InfoRecord& info : snap.table->info) {
    absl::StrAppend(&out, "node device=", info.device);
    for (const auto& [k, v] : info.labels) {
      if (k == "node_guid") continue;
      absl::StrAppend(&out, " ", k, "=", k == "node_desc" ? Quote(v) : v);
    }
    out.push_back('\n');
  }
  for (size_t i = 0; i < snap.table->defs.size(); ++i) {
    const SeriesDef& d = snap.table->defs[i];
    const Value& v = snap.values[i];
    absl::StrAppendFormat(&out,
                          "value device=%s port=%s counter=%s status=%s raw=%d kind=%s width=%d "
                          "unit=%s saturates=%d\n",
                          d.device, d.port, d.counter, StatusName(v.status), v.raw,
                          KindName(d.kind), d.width, UnitName(d.unit), d.saturates ? 1 : 0);
  }
  for (const LinkEvent& e : events) {
    absl::StrAppend(&out, "event device=", e.device, " port=", e.port,
                    " from=", LinkStateName(e.from), " to=", LinkStateName(e.to),
                    " time=", TimeText(e.time), " detail=", Quote(e.detail), "\n");
  }
  for (const std::string& m : errors.messages) absl::StrAppend(&out, "error ", Quote(m), "\n");
  absl::StrAppendFormat(&out, "end %d\n", scan);
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
}

void PrintJson(int scan, const CollectorSnapshot& snap, const CycleErrors& errors,
               const std::vector<LinkEvent>& events) {
  std::string out = absl::StrFormat(R"({"scan":%d,"time":%s,"duration_ms":%d,"error_count":%d)",
                                    scan, Quote(TimeText(snap.timestamp)),
                                    absl::ToInt64Milliseconds(snap.duration), errors.count);
  std::vector<std::string> items;
  for (const InfoRecord& info : snap.table->info) {
    std::vector<std::string> labels;
    for (const auto& [k, v] : info.labels) labels.push_back(absl::StrCat(Quote(k), ":", Quote(v)));
    items.push_back(absl::StrCat(R"({"device":)", Quote(info.device), R"(,"labels":{)",
                                 absl::StrJoin(labels, ","), "}}"));
  }
  absl::StrAppend(&out, R"(,"nodes":[)", absl::StrJoin(items, ","), "]");
  items.clear();
  for (size_t i = 0; i < snap.table->defs.size(); ++i) {
    const SeriesDef& d = snap.table->defs[i];
    const Value& v = snap.values[i];
    items.push_back(absl::StrFormat(
        R"({"source":%s,"device":%s,"port":%s,"counter":%s,"status":%s,"raw":%d,"kind":%s,)"
        R"("width":%d,"unit":%s,"saturates":%s})",
        Quote(d.source), Quote(d.device), Quote(d.port), Quote(d.counter),
        Quote(StatusName(v.status)), v.raw, Quote(KindName(d.kind)), d.width,
        Quote(UnitName(d.unit)), d.saturates ? "true" : "false"));
  }
  absl::StrAppend(&out, R"(,"values":[)", absl::StrJoin(items, ","), "]");
  items.clear();
  for (const LinkEvent& e : events) {
    items.push_back(absl::StrCat(R"({"source":)", Quote(e.source), R"(,"device":)", Quote(e.device),
                                 R"(,"port":)", Quote(e.port), R"(,"from":)",
                                 Quote(LinkStateName(e.from)), R"(,"to":)",
                                 Quote(LinkStateName(e.to)), R"(,"time":)", Quote(TimeText(e.time)),
                                 R"(,"detail":)", Quote(e.detail), "}"));
  }
  absl::StrAppend(&out, R"(,"events":[)", absl::StrJoin(items, ","), "]");
  items.clear();
  for (const std::string& m : errors.messages) items.push_back(Quote(m));
  absl::StrAppend(&out, R"(,"errors":[)", absl::StrJoin(items, ","), "]}\n");
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
}


// ---- --discover ----

using ringside::collectors::DiscoveredLink;
using ringside::collectors::DiscoveredNode;
using ringside::collectors::DiscoveredPort;
using ringside::collectors::DiscoveryStats;
using ringside::collectors::GuidString;
using ringside::collectors::SubnetGraph;

double CpuSeconds() {
  rusage ru;
  std::memset(&ru, 0, sizeof(ru));
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

std::string PassHeader(int pass, absl::Time start, const SubnetGraph& g, const DiscoveryStats& st,
                       double cpu_ms) {
  return absl::StrFormat(
      "discovery %d time=%s duration_ms=%d mads=%d errors=%d cpu_ms=%.3f complete=%d nodes=%d "
      "links=%d",
      pass, TimeText(start), absl::ToInt64Milliseconds(st.duration), st.mads, st.errors, cpu_ms,
      g.complete ? 1 : 0, g.nodes.size(), g.links.size());
}

std::string RateText(const DiscoveredPort& p) {
  return absl::StrCat("width=", ringside::collectors::LinkWidthName(p.width_active),
                      " speed=", ringside::collectors::LinkSpeedName(p.speed_active,
                                                                     p.speed_ext_active));
}

void PrintGraphText(int pass, absl::Time start, const SubnetGraph& g, const DiscoveryStats& st,
                    double cpu_ms) {
  std::string out = PassHeader(pass, start, g, st, cpu_ms) + "\n";
  for (const auto& [guid, n] : g.nodes) {
    absl::StrAppend(&out, "node guid=", GuidString(guid),
                    " type=", ringside::collectors::NodeTypeName(n.info.node_type),
                    " ports=", n.info.num_ports, " lid=", n.lid, " desc=", Quote(n.description),
                    " path=", ringside::collectors::DrPathString(n.path), "\n");
    for (const auto& [num, p] : n.ports) {
      absl::StrAppend(&out, "port guid=", GuidString(guid), " port=", num, " lid=", p.lid,
                      " state=", ringside::collectors::PortStateName(p.state),
                      " phys=", Quote(ringside::collectors::PhysStateName(p.phys_state)), " ",
                      RateText(p), "\n");
    }
  }
  for (const DiscoveredLink& l : g.links) {
    std::string rate;
    if (auto n = g.nodes.find(l.a_guid); n != g.nodes.end()) {
      if (auto p = n->second.ports.find(l.a_port); p != n->second.ports.end()) {
        rate = " " + RateText(p->second);
      }
    }
    absl::StrAppend(&out, "link a=", GuidString(l.a_guid), ":", l.a_port,
                    " b=", GuidString(l.b_guid), ":", l.b_port, rate, "\n");
  }
  for (const std::string& m : st.messages) absl::StrAppend(&out, "error ", Quote(m), "\n");
  absl::StrAppendFormat(&out, "end %d\n", pass);
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
}

void PrintGraphJson(int pass, absl::Time start, const SubnetGraph& g, const DiscoveryStats& st,
                    double cpu_ms) {
  std::string out = absl::StrFormat(
      R"({"pass":%d,"time":%s,"duration_ms":%d,"mads":%d,"error_count":%d,"cpu_ms":%.3f,)"
      R"("complete":%s)",
      pass, Quote(TimeText(start)), absl::ToInt64Milliseconds(st.duration), st.mads, st.errors,
      cpu_ms, g.complete ? "true" : "false");
  std::vector<std::string> items;
  for (const auto& [guid, n] : g.nodes) {
    std::vector<std::string> ports;
    for (const auto& [num, p] : n.ports) {
      ports.push_back(absl::StrFormat(
          R"({"port":%d,"lid":%d,"state":%s,"phys_state":%s,"width":%s,"speed":%s})", num, p.lid,
          Quote(ringside::collectors::PortStateName(p.state)),
          Quote(ringside::collectors::PhysStateName(p.phys_state)),
          Quote(ringside::collectors::LinkWidthName(p.width_active)),
          Quote(ringside::collectors::LinkSpeedName(p.speed_active, p.speed_ext_active))));
    }
    items.push_back(absl::StrFormat(
        R"({"guid":%s,"type":%s,"num_ports":%d,"lid":%d,"description":%s,"path":%s,"ports":[%s]})",
        Quote(GuidString(guid)), Quote(ringside::collectors::NodeTypeName(n.info.node_type)),
        n.info.num_ports, n.lid, Quote(n.description),
        Quote(ringside::collectors::DrPathString(n.path)), absl::StrJoin(ports, ",")));
  }
  absl::StrAppend(&out, R"(,"nodes":[)", absl::StrJoin(items, ","), "]");
  items.clear();
  for (const DiscoveredLink& l : g.links) {
    items.push_back(absl::StrFormat(R"({"a":%s,"a_port":%d,"b":%s,"b_port":%d})",
                                    Quote(GuidString(l.a_guid)), l.a_port,
                                    Quote(GuidString(l.b_guid)), l.b_port));
  }
  absl::StrAppend(&out, R"(,"links":[)", absl::StrJoin(items, ","), "]");
  items.clear();
  for (const std::string& m : st.messages) items.push_back(Quote(m));
  absl::StrAppend(&out, R"(,"errors":[)", absl::StrJoin(items, ","), "]}\n");
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
}

int RunDiscovery(const Args& args) {
  auto transport = ringside::collectors::LibibmadDrTransport::Open(args.options.port);
  if (!transport.ok()) {
    std::fprintf(stderr, "ringside-fabric-scan: %s\n",
                 std::string(transport.status().message()).c_str());
    return 2;
  }
  ringside::collectors::DiscoveryOptions d = args.discovery;
  d.sleep = [](absl::Duration dur) {
    const absl::Time end = absl::Now() + dur;
    while (!g_stop && absl::Now() < end) {
      absl::SleepFor(std::min(end - absl::Now(), absl::Milliseconds(20)));
    }
  };
  int rc = 0;
  const absl::Duration interval = absl::Milliseconds(args.interval_ms);
  absl::Time next = absl::Now();
  for (int pass = 1; !g_stop && (args.scans == 0 || pass <= args.scans); ++pass) {
    const absl::Time start = absl::Now();
    const double cpu0 = CpuSeconds();
    DiscoveryStats st;
    SubnetGraph g = ringside::collectors::DiscoverSubnet(**transport, d, st);
    const double cpu_ms = (CpuSeconds() - cpu0) * 1000;
    rc = (st.errors > 0 || !g.complete) ? 1 : 0;
    if (args.ibnetdiscover) {
      const std::string text = ringside::collectors::IbnetdiscoverText(g);
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
      std::fprintf(stderr, "%s\n", PassHeader(pass, start, g, st, cpu_ms).c_str());
      for (const std::string& m : st.messages) std::fprintf(stderr, "error %s\n", Quote(m).c_str());
    } else if (args.json) {
      PrintGraphJson(pass, start, g, st, cpu_ms);
    } else {
      PrintGraphText(pass, start, g, st, cpu_ms);
    }
    if (args.scans != 0 && pass == args.scans) break;
    next += interval;
    while (!g_stop && absl::Now() < next) {
      absl::SleepFor(std::min(next - absl::Now(), absl::Milliseconds(20)));
    }
    if (absl::Now() > next + interval) next = absl::Now();
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  std::string error;
  if (!ParseArgs(argc, argv, args, error)) {
    std::fprintf(stderr, "ringside-fabric-scan: %s\n%s", error.c_str(), kUsage);
    return 2;
  }
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  if (args.discover) return RunDiscovery(args);

  std::unique_ptr<IbmadCollector> collector = IbmadCollector::Create(args.options);
  if (!collector->Availability().ok()) {
    std::fprintf(stderr, "ringside-fabric-scan: %s\n",
                 std::string(collector->Availability().message()).c_str());
    return 2;
  }
  uint64_t last_errors = 0;
  const absl::Duration interval = absl::Milliseconds(args.interval_ms);
  absl::Time next = absl::Now();
  for (int scan = 1; !g_stop && (args.scans == 0 || scan <= args.scans); ++scan) {
    CollectorSnapshot snap;
    CycleErrors errors;
    const absl::Time start = absl::Now();
    collector->Collect(start, snap, errors);
    snap.timestamp = start;
    snap.duration = absl::Now() - start;
    snap.read_errors = errors.count;
    last_errors = errors.count;
    const std::vector<LinkEvent> events = collector->TakeEvents();
    if (args.json) {
      PrintJson(scan, snap, errors, events);
    } else {
      PrintText(scan, snap, errors, events);
    }
    if (args.scans != 0 && scan == args.scans) break;
    next += interval;
    // Sleep in short steps so a signal ends the run promptly.
    while (!g_stop && absl::Now() < next) {
      absl::SleepFor(std::min(next - absl::Now(), absl::Milliseconds(20)));
    }
    if (absl::Now() > next + interval) next = absl::Now();  // overran: start again from now
  }
  return last_errors > 0 ? 1 : 0;
}
