// Watches the `state` attribute of every InfiniBand/RoCE port under <sysfs-root>/class/infiniband
// at a short period of its own (the agent's --link_state_interval, 100 ms by default), apart from
// the sampling interval, and reports each change of the port's link state as a LinkEvent
// (source "sysfs"), so a port that goes down is paged within that period whatever the counters'
// interval is.
//
// Why a poll: the kernel does not notify readers of these attributes (poll() on them never
// wakes on a change), and libibverbs' async events (verbs/port_events.h) need the uverbs device
// nodes, which a node may not grant the agent. Where both run, the aggregator's link detector
// joins their reports of one transition (each source is one witness).
//
// It can also watch a few error counters of each port (`counters`, e.g. symbol_error): when one
// moved since the last period, TakeCountersMoved() says so, and the agent runs its sampling cycle
// at once instead of at its next slot (Sampler::RequestCycle), so an error burst reaches the
// aggregator within this period too.
//
// Cost: one pread per port (plus one per watched counter) per period on descriptors kept open
// (PolledFile); phys_state is read only when `state` changed, for the event's detail.
#ifndef RINGSIDE_COLLECTORS_INFINIBAND_PORT_STATE_WATCH_H_
#define RINGSIDE_COLLECTORS_INFINIBAND_PORT_STATE_WATCH_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "collectors/common/file_system.h"
#include "collectors/common/link_event.h"
#include "collectors/common/polled_file.h"

namespace ringside::collectors {

struct PortStateWatchOptions {
  std::string sysfs_root = "/sys";
  // How often the device and port lists are read again (opendir), for ports that appeared.
  // A port that vanished shows at once, as a failed read.
  absl::Duration rescan = absl::Seconds(10);
  // Files under each port's counters/ whose change is reported by TakeCountersMoved().
  std::vector<std::string> counters;
};

class PortStateWatcher {
 public:
  explicit PortStateWatcher(PortStateWatchOptions options, FileSystem* fs = DefaultFileSystem());

  // Reads every watched port's state. The first read of a port sets what it is (no event); each
  // change after that is an event, stamped `now`. A port whose state cannot be read any more (its
  // device was removed: the kernel fails reads of a removed attribute) is reported down once if it
  // was up, and reported up again when it comes back. Lists the ports again every `rescan`.
  void Poll(absl::Time now, std::vector<LinkEvent>& out);

  // Whether a watched counter changed since the last call (and clears it).
  bool TakeCountersMoved() {
    const bool moved = counters_moved_;
    counters_moved_ = false;
    return moved;
  }
  uint64_t counter_moves() const { return counter_moves_; }

  size_t ports() const { return ports_.size(); }
  uint64_t polls() const { return polls_; }
  uint64_t read_failures() const { return read_failures_; }

 private:
  struct Port {
    explicit Port(FileSystem* fs, std::string path) : state(fs, std::move(path)) {}
    PolledFile state;
    LinkState last = LinkState::kUnknown;
    struct Counter {
      PolledFile file;
      std::string last;  // the content at the last read; empty before the first
    };
    std::vector<Counter> counters;
    bool listed = true;  // seen at the last rescan
  };
  void Rescan();

  PortStateWatchOptions options_;
  FileSystem* fs_;
  std::string class_dir_;
  // (device, port) → its state file.
  std::map<std::pair<std::string, std::string>, std::unique_ptr<Port>> ports_;
  absl::Time next_rescan_ = absl::InfinitePast();
  uint64_t polls_ = 0;
  uint64_t read_failures_ = 0;
  bool counters_moved_ = false;
  uint64_t counter_moves_ = 0;
};

// The link state an InfiniBand `state` attribute ("4: ACTIVE") stands for: ACTIVE and
// ACTIVE_DEFER are up, DOWN/INIT/ARMED down (no traffic passes), anything else unknown.
LinkState IbPortStateOf(absl::string_view text);

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_INFINIBAND_PORT_STATE_WATCH_H_
