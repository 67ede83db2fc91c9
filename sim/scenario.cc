#include "sim/scenario.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "sim/sim_names.h"

namespace ringside::sim {
namespace {

struct KindName {
  FaultKind kind;
  const char* name;
};
constexpr KindName kKinds[] = {
    {FaultKind::kLinkFlap, "link_flap"},
    {FaultKind::kLinkDown, "link_down"},
    {FaultKind::kLinkDegraded, "link_degraded"},
    {FaultKind::kNvlinkDegraded, "nvlink_degraded"},
    {FaultKind::kPauseStorm, "pause_storm"},
    {FaultKind::kCongestion, "congestion"},
    {FaultKind::kStraggler, "straggler"},
    {FaultKind::kJobSlowdown, "job_slowdown"},
    {FaultKind::kCounterReset, "counter_reset"},
    {FaultKind::kAgentCrash, "agent_crash"},
    {FaultKind::kGpuThermalSlowdown, "gpu_thermal_slowdown"},
    {FaultKind::kGpuPowerCap, "gpu_power_cap"},
    {FaultKind::kGpuXid, "gpu_xid"},
    {FaultKind::kCpuThrottled, "cpu_throttled"},
};

// "20s", "1m30s", "500ms"; a bare number is seconds.
absl::StatusOr<absl::Duration> ParseDurationText(const std::string& text) {
  double secs = 0;
  if (absl::SimpleAtod(text, &secs)) {
    if (!std::isfinite(secs) || secs < 0) return absl::InvalidArgumentError("bad duration " + text);
    return absl::Seconds(secs);
  }
  absl::Duration d;
  if (!absl::ParseDuration(text, &d) || d < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("bad duration \"", text, "\""));
  }
  return d;
}

// yaml-cpp throws on conversions; every read goes through these and turns errors into Status.
absl::Status Get(const YAML::Node& n, const char* key, absl::Duration* out) {
  if (!n[key]) return absl::OkStatus();
  absl::StatusOr<absl::Duration> d = ParseDurationText(n[key].as<std::string>());
  if (!d.ok()) return absl::InvalidArgumentError(absl::StrCat(key, ": ", d.status().message()));
  *out = *d;
  return absl::OkStatus();
}

template <typename T>
void GetScalar(const YAML::Node& n, const char* key, T* out) {
  if (n[key]) *out = n[key].as<T>();
}

absl::Status ParseNode(const YAML::Node& n, const Scenario& s, int* out) {
  const std::string text = n.as<std::string>();
  int idx = 0;
  if (absl::SimpleAtoi(text, &idx)) {
    *out = idx;
  } else {
    idx = -1;
    for (int i = 0; i < s.nodes; ++i) {
      if (s.NodeName(i) == text) idx = i;
    }
    if (idx < 0) return absl::InvalidArgumentError(absl::StrCat("unknown node \"", text, "\""));
    *out = idx;
  }
  if (*out < 0 || *out >= s.nodes) {
    return absl::InvalidArgumentError(absl::StrCat("node ", text, " outside 0..", s.nodes - 1));
  }
  return absl::OkStatus();
}

absl::StatusOr<Expectation> ParseExpectation(const YAML::Node& n) {
  Expectation e;
  if (!n.IsMap() || !n["kind"]) return absl::InvalidArgumentError("an expectation needs a kind");
  e.kind = n["kind"].as<std::string>();
  if (n["entity"]) {
    if (!n["entity"].IsMap()) return absl::InvalidArgumentError("entity must be a map");
    for (const auto& kv : n["entity"]) {
      e.entity[kv.first.as<std::string>()] = kv.second.as<std::string>();
    }
  }
  GetScalar(n, "cause", &e.cause);
  return e;
}

absl::StatusOr<FaultSpec> ParseFault(const YAML::Node& n, const Scenario& s) {
  FaultSpec f;
  if (!n.IsMap() || !n["kind"]) return absl::InvalidArgumentError("a fault needs a kind");
  const std::string kind = n["kind"].as<std::string>();
  if (!ParseFaultKind(kind, &f.kind)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown fault kind \"", kind, "\""));
  }
  if (n["node"]) {
    if (absl::Status st = ParseNode(n["node"], s, &f.node); !st.ok()) return st;
  }
  GetScalar(n, "device", &f.device);
  GetScalar(n, "gpu", &f.gpu);
  GetScalar(n, "link", &f.link);
  GetScalar(n, "rank", &f.rank);
  GetScalar(n, "slowdown_pct", &f.slowdown_pct);
  GetScalar(n, "factor", &f.factor);
  GetScalar(n, "xid", &f.xid);
  GetScalar(n, "throttled_share", &f.throttled_share);
  GetScalar(n, "note", &f.note);
  if (absl::Status st = Get(n, "start", &f.start); !st.ok()) return st;
  if (absl::Status st = Get(n, "duration", &f.duration); !st.ok()) return st;
  if (f.rank >= s.ranks()) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", f.rank, " outside the job's ", s.ranks()));
  }
  if (f.kind == FaultKind::kStraggler || f.kind == FaultKind::kCpuThrottled) {
    if (f.rank < 0)
      return absl::InvalidArgumentError(absl::StrCat("a ", kind, " fault needs a rank"));
    f.node = f.rank / s.gpus;
  }
  if (f.throttled_share <= 0 || f.throttled_share > 1) {
    return absl::InvalidArgumentError("throttled_share must be in (0, 1]");
  }
  if (f.gpu < 0 || f.gpu >= s.gpus || f.link < 0 || f.link >= s.nvlinks) {
    return absl::InvalidArgumentError("gpu or link outside the node");
  }
  if (f.device.empty()) {
    f.device = RailDevice(f.rank >= 0 ? f.rank % s.gpus : 0);
  }
  int rail = -1;
  if (!ParseRail(f.device, &rail) || rail >= s.gpus) {
    return absl::InvalidArgumentError(absl::StrCat("unknown device \"", f.device, "\""));
  }
  if (f.slowdown_pct < 0 || f.slowdown_pct > 1000 || f.factor < 1 || f.factor > 100) {
    return absl::InvalidArgumentError("slowdown_pct or factor out of range");
  }
  if (n["expect"]) {
    if (!n["expect"].IsSequence()) return absl::InvalidArgumentError("expect must be a list");
    for (const auto& e : n["expect"]) {
      absl::StatusOr<Expectation> ex = ParseExpectation(e);
      if (!ex.ok()) return ex.status();
      f.expect.push_back(*ex);
    }
  }
  if (n["allow"]) {
    for (const auto& a : n["allow"]) f.allow.push_back(a.as<std::string>());
  }
  return f;
}

absl::StatusOr<Scenario> ParseRoot(const YAML::Node& root) {
  Scenario s;
  if (!root.IsMap()) return absl::InvalidArgumentError("a scenario is a YAML map");
  GetScalar(root, "name", &s.name);
  GetScalar(root, "description", &s.description);
  GetScalar(root, "seed", &s.seed);
  if (absl::Status st = Get(root, "duration", &s.duration); !st.ok()) return st;
  if (absl::Status st = Get(root, "grace", &s.grace); !st.ok()) return st;
  if (const YAML::Node c = root["cluster"]) {
    GetScalar(c, "nodes", &s.nodes);
    GetScalar(c, "gpus", &s.gpus);
    GetScalar(c, "nodes_per_leaf", &s.nodes_per_leaf);
    GetScalar(c, "nvlinks", &s.nvlinks);
    if (absl::Status st = Get(c, "interval", &s.interval); !st.ok()) return st;
  }
  if (s.nodes < 1 || s.nodes > 4096 || s.gpus < 1 || s.gpus > 16 || s.nodes_per_leaf < 1 ||
      s.nvlinks < 1 || s.nvlinks > 18) {
    return absl::InvalidArgumentError("cluster: nodes 1..4096, gpus 1..16, nvlinks 1..18");
  }
  if (s.interval < absl::Milliseconds(50) || s.duration <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("interval ≥ 50ms and a positive duration");
  }
  if (const YAML::Node t = root["traffic"]) {
    GetScalar(t, "gbytes_per_second", &s.gbytes_per_second);
    GetScalar(t, "noise", &s.noise);
    GetScalar(t, "background_noise", &s.background_noise);
  }
  if (const YAML::Node j = root["job"]) {
    GetScalar(j, "enabled", &s.job);
    GetScalar(j, "id", &s.job_id);
    GetScalar(j, "jitter", &s.jitter);
    if (absl::Status st = Get(j, "compute", &s.compute); !st.ok()) return st;
    if (absl::Status st = Get(j, "collective", &s.collective); !st.ok()) return st;
  }
  if (s.compute < absl::Milliseconds(5) || s.collective < absl::Microseconds(100) ||
      s.jitter < 0 || s.jitter > 0.5) {
    return absl::InvalidArgumentError("job: compute ≥ 5ms, collective ≥ 100us, jitter 0..0.5");
  }
  if (const YAML::Node a = root["aggregator_args"]) {
    for (const auto& x : a) s.aggregator_args.push_back(x.as<std::string>());
  }
  if (const YAML::Node fs = root["faults"]) {
    if (!fs.IsSequence()) return absl::InvalidArgumentError("faults must be a list");
    int i = 0;
    for (const auto& f : fs) {
      absl::StatusOr<FaultSpec> fault = ParseFault(f, s);
      if (!fault.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("fault ", i, ": ", fault.status().message()));
      }
      s.faults.push_back(*fault);
      ++i;
    }
  }
  FillDefaultExpectations(s);
  return s;
}

}  // namespace

absl::string_view FaultKindName(FaultKind k) {
  for (const KindName& kn : kKinds) {
    if (kn.kind == k) return kn.name;
  }
  return "unknown";
}

bool ParseFaultKind(absl::string_view name, FaultKind* out) {
  for (const KindName& kn : kKinds) {
    if (name == kn.name) {
      *out = kn.kind;
      return true;
    }
  }
  return false;
}

std::string Scenario::NodeName(int i) const { return SimNodeName(i, nodes); }

absl::StatusOr<Scenario> ParseScenario(absl::string_view yaml_text) {
  try {
    YAML::Node root = YAML::Load(std::string(yaml_text));
    return ParseRoot(root);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("YAML: ", e.what()));
  }
}

absl::StatusOr<Scenario> LoadScenario(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  absl::StatusOr<Scenario> s = ParseScenario(ss.str());
  if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", s.status().message()));
  return s;
}

void FillDefaultExpectations(Scenario& s) {
  for (FaultSpec& f : s.faults) {
    const std::string node = s.NodeName(f.node);
    if (f.expect.empty()) {
      switch (f.kind) {
        case FaultKind::kLinkFlap:
          f.expect.push_back({"link_flapping", {{"node", node}, {"device", f.device}}, ""});
          break;
        case FaultKind::kLinkDown:
          f.expect.push_back({"link_down", {{"node", node}, {"device", f.device}}, ""});
          break;
        case FaultKind::kLinkDegraded:
          f.expect.push_back({"link_degraded", {{"node", node}, {"device", f.device}}, ""});
          break;
        case FaultKind::kNvlinkDegraded:
          f.expect.push_back({"link_degraded",
                              {{"node", node},
                               {"gpu", absl::StrCat(f.gpu)},
                               {"link", absl::StrCat(f.link)}},
                              ""});
          break;
        case FaultKind::kPauseStorm:
          f.expect.push_back({"pause_storm", {{"node", node}, {"device", f.device}}, ""});
          break;
        case FaultKind::kCongestion:
          f.expect.push_back({"congestion", {{"node", node}, {"device", f.device}}, ""});
          break;
        case FaultKind::kStraggler:
          f.expect.push_back(
              {"straggler", {{"rank", absl::StrCat(f.rank)}, {"node", node}}, "host"});
          break;
        case FaultKind::kJobSlowdown:
          f.expect.push_back({"job_slowdown", {{"job", s.job_id}}, ""});
          break;
        case FaultKind::kCounterReset:
        case FaultKind::kAgentCrash:
        case FaultKind::kGpuPowerCap:
          break;  // must raise nothing
        case FaultKind::kGpuThermalSlowdown:
          f.expect.push_back({"gpu_throttled", {{"node", node}, {"gpu", absl::StrCat(f.gpu)}}, ""});
          break;  // with a rank and slowdown_pct, that rank's straggler (below) has it as cause
        case FaultKind::kGpuXid:
          f.expect.push_back({"gpu_xid", {{"node", node}, {"gpu", absl::StrCat(f.gpu)}}, ""});
          break;
        case FaultKind::kCpuThrottled:
          // The rank's own cgroup hits its CPU quota: its straggler's cause is that evidence.
          if (f.slowdown_pct > 0) {
            f.expect.push_back({"straggler",
                                {{"rank", absl::StrCat(f.rank)}, {"node", node}},
                                "cgroup_cpu_throttled"});
          }
          break;
      }
      // A fabric fault that slows a rank: that rank is a straggler caused by the fault.
      if (f.rank >= 0 && f.slowdown_pct > 0 && f.kind != FaultKind::kStraggler &&
          f.kind != FaultKind::kJobSlowdown && f.kind != FaultKind::kCpuThrottled &&
          !f.expect.empty()) {
        f.expect.push_back({"straggler",
                            {{"rank", absl::StrCat(f.rank)}, {"node", s.NodeName(f.rank / s.gpus)}},
                            f.expect.front().kind});
      }
    }
    if (f.allow.empty()) {
      if (f.kind == FaultKind::kLinkFlap) f.allow = {"link_down"};
      if (f.kind == FaultKind::kLinkDown) f.allow = {"link_flapping"};
    }
  }
}

Scenario DemoScenario(int nodes, int gpus, absl::Duration duration) {
  Scenario s;
  s.name = "demo";
  s.description = "the README's demo: five faults over about two minutes";
  s.nodes = nodes;
  s.gpus = gpus;
  s.nodes_per_leaf = std::max(1, nodes / 2);
  s.duration = duration;
  // Two leaves (nodes 0..n/2-1 and the rest): the fabric-side faults of one leaf must not be
  // the cause of the host straggler in the other.
  auto clamp = [&](int i) { return std::max(0, std::min(i, nodes - 1)); };
  const int leaf1 = s.nodes_per_leaf;
  const int rail = std::min(3, gpus - 1);
  const double scale = absl::ToDoubleSeconds(duration) / 150.0;  // faults spread over the run
  auto at = [&](double secs) { return absl::Seconds(std::round(secs * std::min(1.0, scale))); };
  auto add = [&](FaultKind k, int node, int r, double start, double len, const char* note) {
    FaultSpec f;
    f.kind = k;
    f.node = node;
    f.device = RailDevice(std::min(r, gpus - 1));
    f.start = at(start);
    f.duration = at(len);
    f.note = note;
    s.faults.push_back(f);
    return &s.faults.back();
  };
  add(FaultKind::kLinkFlap, clamp(2), 1, 10, 40,
      "link flap: a bad transceiver (down 3 s of every 10 s)");
  FaultSpec* storm = add(FaultKind::kPauseStorm, clamp(1), rail, 25, 45,
                         "PFC pause storm sent by one port, spreading through its leaf; "
                         "the rank on that rail slows down");
  storm->rank = storm->node * gpus + rail;
  storm->slowdown_pct = 40;
  add(FaultKind::kLinkDegraded, clamp(leaf1 + 1), 5, 45, 60,
      "degraded link: symbol errors from a dirty fibre");
  add(FaultKind::kCongestion, clamp(3), 6, 60, 45, "ECN congestion on a RoCE port");
  const int snode = clamp(leaf1 + 2);
  FaultSpec* strag = add(FaultKind::kStraggler, snode, 2, 80, 50,
                         "a host-caused straggler: one rank's compute 25% slower");
  strag->rank = snode * gpus + std::min(2, gpus - 1);
  strag->slowdown_pct = 25;
  FillDefaultExpectations(s);
  return s;
}

}  // namespace ringside::sim
