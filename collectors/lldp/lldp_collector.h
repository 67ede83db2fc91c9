// The LLDP neighbour of each netdev, from lldpd (lldp_client.h), as info records (source "lldp",
// device = the netdev; labels chassis_id, chassis_name, port_id, port_descr, mgmt_addr, ...) and
// two series per netdev: the number of neighbours and how often the neighbour changed. lldpd is
// asked every refresh_interval, not every cycle. A missing or silent lldpd turns the collector's
// Availability() off (ringside_agent_collector_up 0), said once in the log, and is retried every
// refresh_interval; a neighbour that changes (recabling) is logged and its record replaced.
#ifndef RINGSIDE_COLLECTORS_LLDP_LLDP_COLLECTOR_H_
#define RINGSIDE_COLLECTORS_LLDP_LLDP_COLLECTOR_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "collectors/common/collector.h"
#include "collectors/lldp/lldp_client.h"

namespace ringside::collectors {

struct LldpOptions {
  LldpClientOptions client;
  absl::Duration refresh_interval = absl::Seconds(10);
  // Where the collector says that lldpd went away or came back and that a neighbour changed.
  std::function<void(const std::string&)> log;
  // The source of neighbours; ReadLldpNeighbors(client) when empty (tests pass their own).
  std::function<absl::StatusOr<std::vector<LldpNeighbor>>()> read;
};

// The info record of one netdev's neighbour (the first, when lldpd knows several on one netdev).
InfoRecord LldpInfoRecord(const LldpNeighbor& n);

// "leaf-1 port Ethernet1 (chassis mac 0c:..)": a neighbour in one line, for logs.
std::string DescribeNeighbor(const LldpNeighbor& n);

class LldpCollector final : public Collector {
 public:
  explicit LldpCollector(LldpOptions options);
  absl::string_view name() const override { return "lldp"; }
  void Collect(absl::Time now, CollectorSnapshot& out, CycleErrors& errors) override;
  absl::Status Availability() const override { return availability_; }

 private:
  struct PerNetdev {
    LldpNeighbor neighbor;  // the current one; chassis_id and port_id empty when none
    bool present = false;
    uint64_t changes = 0;
  };
  void Refresh(absl::Time now);
  void Log(const std::string& line) const;

  LldpOptions options_;
  absl::Status availability_;  // OK until the first read says otherwise (it logs itself)
  bool reported_failure_ = false;
  absl::Time last_refresh_ = absl::InfinitePast();
  std::map<std::string, PerNetdev> netdevs_;
  std::shared_ptr<const SeriesTable> table_;
};

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_LLDP_LLDP_COLLECTOR_H_
