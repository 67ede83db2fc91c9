#include "collectors/ibmad/port_transitions.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "collectors/ibmad/mad_fields.h"

namespace ringside::collectors {
namespace {

constexpr uint64_t kLinkDownedMax = 255;  // 8-bit, saturates

std::string StatesText(uint8_t state, uint8_t phys_state) {
  return absl::StrCat(PortStateName(state), "/", PhysStateName(phys_state));
}

}  // namespace

LinkState LinkStateOfPortState(uint8_t state) {
  switch (state) {
    case 4:  // ACTIVE
    case 5:  // ACTIVE_DEFER
      return LinkState::kUp;
    case 1:  // DOWN
    case 2:  // INIT
    case 3:  // ARMED
      return LinkState::kDown;
    default:
      return LinkState::kUnknown;
  }
}

void PortTransitionTracker::Observe(const std::string& device, const std::string& port,
                                    const PortReading& reading, absl::Time now,
                                    std::vector<LinkEvent>& out) {
  Known& k = known_[{device, port}];
  k.last_seen = now;

  auto emit = [&](LinkState from, LinkState to, std::string detail) {
    LinkEvent e;
    e.time = now;
    e.source = "ibmad";
    e.device = device;
    e.port = port;
    e.from = from;
    e.to = to;
    e.detail = std::move(detail);
    out.push_back(std::move(e));
  };

  const LinkState before = k.has_state ? LinkStateOfPortState(k.state) : LinkState::kUnknown;
  const LinkState after =
      reading.has_state ? LinkStateOfPortState(reading.state) : LinkState::kUnknown;
  const bool observed =
      before != LinkState::kUnknown && after != LinkState::kUnknown && before != after;

  // Downs the LinkDownedCounter saw beyond the one an observed up→down accounts for. Only across
  // two consecutive scans that both read the counter and the state, and only while the counter
  // neither saturated nor went back (reset).
  uint64_t missed = 0;
  if (before != LinkState::kUnknown && after != LinkState::kUnknown && k.has_link_downed &&
      reading.has_link_downed && k.link_downed < kLinkDownedMax &&
      reading.link_downed > k.link_downed) {
    const uint64_t delta = reading.link_downed - k.link_downed;
    const uint64_t seen = observed && after == LinkState::kDown ? 1 : 0;
    missed = std::min(delta > seen ? delta - seen : 0, kMaxInferredPairs);
  }
  const std::string inferred_detail =
      absl::StrCat("inferred from link_downed ", k.link_downed, " -> ", reading.link_downed);
  auto emit_pairs = [&](LinkState first_to) {
    const LinkState other = first_to == LinkState::kDown ? LinkState::kUp : LinkState::kDown;
    for (uint64_t i = 0; i < missed; ++i) {
      emit(other, first_to, inferred_detail);
      emit(first_to, other, inferred_detail);
    }
  };
  const std::string observed_detail =
      observed ? absl::StrCat("PortInfo ", StatesText(k.state, k.phys_state), " -> ",
                              StatesText(reading.state, reading.phys_state))
               : std::string();

  if (before == LinkState::kUp) {
    // up, (down, up)×missed, then the observed up→down if any.
    emit_pairs(LinkState::kDown);
    if (observed) emit(before, after, observed_detail);
  } else if (before == LinkState::kDown) {
    if (observed) {
      // down→up, then (down, up)×missed.
      emit(before, after, observed_detail);
      emit_pairs(LinkState::kDown);
    } else {
      // Still down: (up, down)×missed.
      emit_pairs(LinkState::kUp);
    }
  }

  if (reading.has_state) {
    k.has_state = true;
    k.state = reading.state;
    k.phys_state = reading.phys_state;
  }
  // A scan that could not read the counter leaves no baseline: the next delta would span two
  // intervals whose state changes were not all seen.
  k.has_link_downed = reading.has_link_downed;
  if (reading.has_link_downed) k.link_downed = reading.link_downed;
}

void PortTransitionTracker::ForgetOlderThan(absl::Time before) {
  for (auto it = known_.begin(); it != known_.end();) {
    it = it->second.last_seen < before ? known_.erase(it) : std::next(it);
  }
}

}  // namespace ringside::collectors
