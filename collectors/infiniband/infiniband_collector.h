// Reads every InfiniBand/RoCE port under <sysfs-root>/class/infiniband: PMA counters (counters/,
// counters_ext/), driver counters (hw_counters/), port attributes (state, phys_state, rate,
// link_layer) and device attributes (hca_type, fw_ver, board_id, node_guid).
#ifndef RINGSIDE_COLLECTORS_INFINIBAND_INFINIBAND_COLLECTOR_H_
#define RINGSIDE_COLLECTORS_INFINIBAND_INFINIBAND_COLLECTOR_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "collectors/common/collector.h"
#include "collectors/common/file_system.h"
#include "collectors/common/polled_file.h"

namespace ringside::collectors {

struct InfinibandOptions {
  std::string sysfs_root = "/sys";
  // Ports and counter files are listed again at this interval even when the device list looks
  // unchanged (a driver can add hw_counters at runtime). Device arrivals and departures are seen
  // every cycle.
  absl::Duration rediscover_interval = absl::Seconds(30);
  // How often the device list itself is read (opendir of class/infiniband). A device that
  // vanishes shows sooner, as a failed read of its files; one that arrives waits for this.
  absl::Duration device_check_interval = absl::Seconds(1);
};

class InfinibandCollector final : public Collector {
 public:
  InfinibandCollector(InfinibandOptions options, FileSystem* fs = DefaultFileSystem());
  absl::string_view name() const override { return "infiniband"; }
  void Collect(absl::Time now, CollectorSnapshot& out, CycleErrors& errors) override;

 private:
  // How one series' file is turned into a value.
  enum class Parse : uint8_t { kCounter, kGauge, kStateId, kRate };
  struct Polled {
    PolledFile file;
    Parse parse;
  };
  struct DeviceKey {
    std::string name;
    uint64_t inode;
    bool operator==(const DeviceKey&) const = default;
  };

  void Discover(const std::vector<DeviceKey>& devices);
  // `driver`: the kernel driver bound to the device's parent (device/driver), "" if none.
  void DiscoverPort(const std::string& device, const std::string& driver,
                    const std::string& port_dir, const std::string& port, SeriesTable& table);
  absl::StatusOr<std::vector<DeviceKey>> ListDevices();

  InfinibandOptions options_;
  FileSystem* fs_;
  std::string class_dir_;
  std::vector<DeviceKey> devices_;
  absl::Time last_discovery_ = absl::InfinitePast();
  absl::Time last_device_check_ = absl::InfinitePast();
  std::shared_ptr<const SeriesTable> table_;
  std::vector<Polled> polled_;  // parallel to table_->defs
};

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_INFINIBAND_INFINIBAND_COLLECTOR_H_
