// False alarms: 1,000 node-hours of simulated fault-free but noisy traffic through the fabric
// detectors, sampled every 10 s, raise at most one incident.
//
// Each node has an InfiniBand port, a RoCE port (netdev eth0 = mlx5_1 port 1, PFC on priority 3,
// DCQCN) and two NVLinks. The noise: bursty pauses (a burst paused 60-100 % of one or two samples,
// never three), background pauses of up to 20 %, single symbol errors now and then, small
// port_rcv_errors bursts, single NVLink CRC errors, ECN marks and CNPs at a few hundred a second
// with single-sample spikes, 32-bit hardware counters wrapping, error counters already stuck at
// their maximum on some nodes, and a driver reload now and then (every counter reset to zero).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "analysis/congestion_detector.h"
#include "analysis/incidents.h"
#include "analysis/link_detector.h"
#include "analysis/pause_storm_detector.h"
#include "tests/analysis/fabric_sim.h"

namespace ringside::analysis {
namespace {

using testing::SimCounter;
using testing::SimState;

class Rng {  // xorshift64*: cheap enough for tens of millions of draws
 public:
  explicit Rng(uint64_t seed) : s_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t Next() {
    s_ ^= s_ >> 12;
    s_ ^= s_ << 25;
    s_ ^= s_ >> 27;
    return s_ * 0x2545F4914F6CDD1Dull;
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * (1.0 / 9007199254740992.0); }
  bool Chance(double p) { return Uniform() < p; }

 private:
  uint64_t s_;
};

// Which detector a series goes to, decided once per series definition as the aggregator would.
enum class Route { kNone, kLink, kPause, kCongestion };

Route RouteOf(absl::string_view source, absl::string_view counter) {
  if (LinkDetector::Uses(source, counter)) return Route::kLink;
  if (PauseStormDetector::Uses(source, counter)) return Route::kPause;
  if (CongestionDetector::Uses(source, counter)) return Route::kCongestion;
  return Route::kNone;
}

struct Series {
  SimCounter* counter = nullptr;
  Route route = Route::kNone;
};

class Node {
 public:
  Node(int index, uint64_t seed) : name_(absl::StrCat("node-", index)), rng_(seed) {
    const bool stuck = index % 7 == 0;  // some nodes' error counters saturated long ago
    auto add = [&](const char* source, const char* device, const char* port, const char* counter,
                   uint8_t width, bool saturates, uint64_t start, int prio = -1) {
      series_.push_back(std::make_unique<SimCounter>(name_, source, device, port, counter, width,
                                                     saturates, start, prio));
      return Series{series_.back().get(), RouteOf(source, counter)};
    };
    link_downed_ = add("infiniband", "mlx5_0", "1", "link_downed", 8, true, 3);
    symbol_ = add("infiniband", "mlx5_0", "1", "symbol_error", 16, true, stuck ? 65535 : 40);
    ler_ = add("infiniband", "mlx5_0", "1", "link_error_recovery", 8, true, 1);
    rcv_ = add("infiniband", "mlx5_0", "1", "port_rcv_errors", 16, true, stuck ? 65535 : 900);
    lli_ = add("infiniband", "mlx5_0", "1", "local_link_integrity_errors", 4, true, 0);
    rx_pause_ = add("ethtool", "eth0", "", "rx_prio3_pause_duration", 64, false, 1ull << 40, 3);
    tx_pause_ = add("ethtool", "eth0", "", "tx_prio3_pause_duration", 64, false, 1ull << 41, 3);
    tx_frames_ = add("ethtool", "eth0", "", "tx_prio3_pause", 64, false, 5000, 3);
    storm_ = add("ethtool", "eth0", "", "tx_pause_storm_warning_events", 64, false, 0);
    carrier_ = add("netdev", "eth0", "", "carrier_down_count", 32, false, 2);
    ecn_ = add("infiniband_hw", "mlx5_1", "1", "np_ecn_marked_roce_packets", 32, false,
               4294967295u - (rng_.Next() % 100000000));
    cnp_ = add("infiniband_hw", "mlx5_1", "1", "np_cnp_sent", 32, false, rng_.Next() % 4294967295u);
    rp_ = add("infiniband_hw", "mlx5_1", "1", "rp_cnp_handled", 32, false, 0);
    for (int l = 0; l < 2; ++l) {
      const std::string link = absl::StrCat(l);
      replay_[l] = add("nvlink", "0", link.c_str(), "replay_errors", 64, false, 0);
      crc_[l] = add("nvlink", "0", link.c_str(), "crc_flit_errors", 64, false, 12);
      nv_state_[l] = std::make_unique<SimState>(name_, "nvlink", "0", link, "link_state");
    }
    ib_state_ = std::make_unique<SimState>(name_, "infiniband_port", "mlx5_0", "1", "state");
    oper_ = std::make_unique<SimState>(name_, "netdev", "eth0", "", "operstate");
  }

  const std::string& name() const { return name_; }

  template <typename Sink>
  void Sample(absl::Time t, Sink&& sink) {
    const bool reload = rng_.Chance(1.0 / (200 * 360));  // a driver reload every ~200 hours
    auto step = [&](const Series& s, uint64_t inc) {
      sink(reload ? s.counter->Reset(t, inc) : s.counter->Step(t, inc), s.route);
    };
    sink.State(ib_state_->At(t, 4));
    sink.State(oper_->At(t, 6));
    for (int l = 0; l < 2; ++l) sink.State(nv_state_[l]->At(t, 1));
    step(link_downed_, 0);
    step(symbol_, rng_.Chance(1.0 / 720) ? 1 : 0);  // a single symbol error every ~2 hours
    step(ler_, 0);
    step(rcv_, rng_.Chance(1.0 / 360) ? 1 + rng_.Next() % 3 : 0);
    step(lli_, 0);
    // Pauses: background up to 20 %, bursts of one or two samples at 60-100 %.
    double rx = rng_.Uniform() * 0.2, tx = rng_.Uniform() * 0.1;
    if (burst_ == 0 && quiet_ > 3 && rng_.Chance(0.02)) burst_ = rng_.Chance(0.5) ? 1 : 2;
    if (burst_ > 0) {
      --burst_;
      quiet_ = 0;
      rx = 0.6 + 0.4 * rng_.Uniform();
      tx = 0.6 + 0.4 * rng_.Uniform();
    } else {
      ++quiet_;
    }
    step(rx_pause_, static_cast<uint64_t>(rx * 10e6));
    step(tx_pause_, static_cast<uint64_t>(tx * 10e6));
    step(tx_frames_, static_cast<uint64_t>(tx * 30000));
    step(storm_, 0);
    step(carrier_, 0);
    // ECN/CNP: a few hundred a second, a single-sample spike now and then.
    const bool spike = rng_.Chance(0.01);
    step(ecn_, spike ? 30000 + rng_.Next() % 20000 : rng_.Next() % 3000);
    step(cnp_, spike ? 15000 : rng_.Next() % 1500);
    step(rp_, rng_.Next() % 2000);
    for (int l = 0; l < 2; ++l) {
      step(replay_[l], 0);
      step(crc_[l], rng_.Chance(1.0 / 500) ? 1 : 0);  // single CRC errors
    }
  }

 private:
  std::string name_;
  Rng rng_;
  std::vector<std::unique_ptr<SimCounter>> series_;
  Series link_downed_, symbol_, ler_, rcv_, lli_, rx_pause_, tx_pause_, tx_frames_, storm_,
      carrier_, ecn_, cnp_, rp_;
  Series replay_[2];
  Series crc_[2];
  std::unique_ptr<SimState> ib_state_, oper_;
  std::unique_ptr<SimState> nv_state_[2];
  int burst_ = 0;
  int quiet_ = 0;
};

TEST(FabricFalseAlarmTest, ThousandNodeHoursOfNoisyHealthyTrafficRaiseAtMostOneIncident) {
  constexpr int kNodes = 100;
  constexpr int kHours = 10;
  constexpr int kSamplesPerHour = 360;  // every 10 s
  PortDirectory dir;
  std::vector<std::unique_ptr<Node>> nodes;
  for (int i = 0; i < kNodes; ++i) {
    nodes.push_back(std::make_unique<Node>(i, 1000 + i));
    dir.MapNetdev(nodes.back()->name(), "eth0", "mlx5_1", "1");
  }
  LinkDetector links({}, &dir);
  PauseStormDetector pauses({}, nullptr, &dir);
  CongestionDetector congestion({}, &dir);
  IncidentManager incidents(nullptr);
  std::vector<Finding> out;
  uint64_t steps = 0;
  struct Sink {
    void operator()(const CounterStep& s, Route route) {
      ++*steps;
      switch (route) {
        case Route::kLink:
          links->ObserveCounter(s, *out);
          break;
        case Route::kPause:
          pauses->ObserveCounter(s, *out);
          break;
        case Route::kCongestion:
          congestion->ObserveCounter(s, *out);
          break;
        case Route::kNone:
          break;
      }
    }
    void State(const StateSample& s) {
      ++*steps;
      links->ObserveState(s, *out);
    }
    LinkDetector* links;
    PauseStormDetector* pauses;
    CongestionDetector* congestion;
    std::vector<Finding>* out;
    uint64_t* steps;
  } sink{&links, &pauses, &congestion, &out, &steps};

  const auto wall = std::chrono::steady_clock::now();
  int opened = 0;
  std::vector<std::string> what;
  for (int i = 0; i < kHours * kSamplesPerHour; ++i) {
    const absl::Time t = testing::At(i);
    for (auto& n : nodes) n->Sample(t, sink);
    if (i % 6 == 5) {  // once a simulated minute
      links.Advance(t, out);
      pauses.Advance(t, out);
      congestion.Advance(t, out);
    }
    if (!out.empty()) {
      std::vector<IncidentChange> changes;
      ASSERT_TRUE(incidents.Apply(out, &changes).ok());
      for (const IncidentChange& c : changes) {
        if (c.type == IncidentChangeType::kOpened) {
          ++opened;
          what.push_back(c.incident.summary);
        }
      }
      out.clear();
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count();
  std::printf("%d node-hours, %llu samples and steps, %.2f s, %d incidents\n", kNodes * kHours,
              static_cast<unsigned long long>(steps), seconds, opened);
  EXPECT_LE(opened, 1) << (what.empty() ? "" : what.front());
  EXPECT_EQ(links.links(), static_cast<size_t>(kNodes * 4));  // IB, RoCE, two NVLinks
}

}  // namespace
}  // namespace ringside::analysis
