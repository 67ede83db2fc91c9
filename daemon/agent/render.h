// Human and machine renderings of a snapshot: `ringside-agent --once -o text|json`, and the live
// rate table of `--print-rates`.
#ifndef RINGSIDE_DAEMON_AGENT_RENDER_H_
#define RINGSIDE_DAEMON_AGENT_RENDER_H_

#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "daemon/agent/sampler.h"

namespace ringside::daemon {

// A JSON array with one object per series: node, source, device, port, counter, kind, value (raw,
// null when unavailable or failed), status, unit, width.
std::string RenderJson(const AgentSnapshot& snap);

// One line per series, aligned columns.
std::string RenderText(const AgentSnapshot& snap);

// Per-second rates between consecutive snapshots, computed with each counter's width (a wrap is
// not a drop to zero, a saturated counter is marked, a reset is a new baseline), and every state
// change. Lines of counters that did not move are left out.
class RatePrinter {
 public:
  explicit RatePrinter(size_t max_lines = 40) : max_lines_(max_lines) {}
  // Rates since the previous snapshot given; empty for the first.
  std::string Render(const AgentSnapshot& snap);

 private:
  using Key = std::tuple<std::string, std::string, std::string, std::string>;
  struct Last {
    uint64_t raw;
    absl::Time at;
  };
  size_t max_lines_;
  std::map<Key, Last> last_;
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGENT_RENDER_H_
