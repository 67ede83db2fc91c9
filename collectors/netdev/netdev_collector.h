// Reads every network interface under <sysfs-root>/class/net: statistics/*, carrier_changes,
// carrier_up_count, carrier_down_count, operstate, speed, mtu; and maps each RoCE netdev to its RDMA
// device and port, so a pause counter and a port counter of the same wire meet.
#ifndef RINGSIDE_COLLECTORS_NETDEV_NETDEV_COLLECTOR_H_
#define RINGSIDE_COLLECTORS_NETDEV_NETDEV_COLLECTOR_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "collectors/common/collector.h"
#include "collectors/common/file_system.h"
#include "collectors/common/polled_file.h"

namespace ringside::collectors {

struct NetdevOptions {
  std::string sysfs_root = "/sys";
  absl::Duration rediscover_interval = absl::Seconds(30);
  // How often class/net itself is listed (see InfinibandOptions::device_check_interval).
  absl::Duration device_check_interval = absl::Seconds(1);
};

// A netdev's RDMA device and port.
struct RdmaPortRef {
  std::string device;
  std::string port;
  bool operator==(const RdmaPortRef&) const = default;
};

// netdev name → RDMA port, from class/infiniband/<dev>/ports/<n>/gid_attrs/ndevs/* and, for a
// device whose GID table names no netdev, class/infiniband/<dev>/device/net/ (ordered by the
// netdev's dev_port).
std::map<std::string, RdmaPortRef> MapNetdevsToRdmaPorts(FileSystem* fs,
                                                          const std::string& sysfs_root);

// RFC 2863 operational states as the kernel names them in `operstate`, by IF_OPER_* id.
absl::StatusOr<uint64_t> OperStateId(absl::string_view text);

class NetdevCollector final : public Collector {
 public:
  NetdevCollector(NetdevOptions options, FileSystem* fs = DefaultFileSystem());
  absl::string_view name() const override { return "netdev"; }
  void Collect(absl::Time now, CollectorSnapshot& out, CycleErrors& errors) override;

 private:
  enum class Parse : uint8_t { kCounter, kGauge, kOperState, kSpeed };
  struct Polled {
    PolledFile file;
    Parse parse;
  };
  struct IfKey {
    std::string name;
    uint64_t inode;
    bool operator==(const IfKey&) const = default;
  };

  void Discover(const std::vector<IfKey>& interfaces);

  NetdevOptions options_;
  FileSystem* fs_;
  std::string class_dir_;
  std::vector<IfKey> interfaces_;
  absl::Time last_discovery_ = absl::InfinitePast();
  absl::Time last_device_check_ = absl::InfinitePast();
  std::shared_ptr<const SeriesTable> table_;
  std::vector<Polled> polled_;
};

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_NETDEV_NETDEV_COLLECTOR_H_
