// Reads every driver statistic of each network interface (what `ethtool -S` shows): through the
// SIOCETHTOOL ioctl (default), or from `ethtool -S` text dumps in a folder for replaying captured
// data and for the simulator.
//
// Series: source "ethtool", device = interface, counter = the driver's own stat name, 64-bit
// counters (units and priority from the name, see ethtool_names.h). Per interface, one
// "ethtool_caps" info record says at each discovery which pause / storm / discard / ECN counters
// the NIC has, so a NIC without PFC counters says so once instead of failing every cycle.
//
// Interfaces: for the ioctl, the entries of <sysfs-root>/class/net (the sysfs of the network
// namespace the collector's socket lives in); for a folder, its files, one per interface, named
// after it (an <if>/statistics file, the layout of node_exporter's fixtures, is read too; names
// starting with "." are skipped, so writers can write ".eth0.tmp" and rename it into place).
//
// Count race (reference/ib-roce-counters.md §5.1): each cycle asks the kernel for the number of
// stats the collector holds names for; when the driver's set changed, the collector re-reads that
// interface's names, publishes a new table, and reports that one sample as unavailable (no error).
// A change that keeps the count (PFC moved from one priority to another between two cycles) is
// caught when any of the interface's counters goes backwards: the names are re-read then, and if
// they differ the sample is skipped (a counter that went backwards under unchanged names is a
// real reset and is kept). A same-count rename whose new counters are all at least the old ones
// is seen at the next rediscovery.
#ifndef RINGSIDE_COLLECTORS_ETHTOOL_ETHTOOL_COLLECTOR_H_
#define RINGSIDE_COLLECTORS_ETHTOOL_ETHTOOL_COLLECTOR_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "collectors/common/collector.h"
#include "collectors/common/file_system.h"
#include "collectors/ethtool/ethtool_ioctl.h"
#include "collectors/ethtool/ethtool_names.h"

namespace ringside::collectors {

struct EthtoolSource {
  enum class Kind : uint8_t { kIoctl, kDir };
  Kind kind = Kind::kIoctl;
  std::string dir;  // kDir: the folder of dumps
};

// The --ethtool-source flag: "ioctl" or "dir:PATH". InvalidArgument otherwise.
absl::StatusOr<EthtoolSource> ParseEthtoolSource(absl::string_view flag);

struct EthtoolOptions {
  std::string sysfs_root = "/sys";
  EthtoolSource source;
  // Only these interfaces, if not empty (exact names).
  std::vector<std::string> interfaces;
  // String sets (ioctl) are read again at this interval even when nothing looks changed.
  // Interface arrivals and departures, and string-set count changes, are seen every cycle.
  absl::Duration rediscover_interval = absl::Seconds(30);
  // Largest dump file accepted (kDir).
  size_t max_dump_bytes = 16 << 20;
};

class EthtoolCollector final : public Collector {
 public:
  // `ioctl`: the protocol to use for the ioctl source; null opens the real one (a socket in the
  // current network namespace). Unused for a folder source.
  EthtoolCollector(EthtoolOptions options, FileSystem* fs = DefaultFileSystem(),
                   std::unique_ptr<EthtoolIoctl> ioctl = nullptr);
  absl::string_view name() const override { return "ethtool"; }
  // Times a counter going backwards made the collector re-read an interface's names.
  uint64_t name_checks() const { return name_checks_; }
  void Collect(absl::Time now, CollectorSnapshot& out, CycleErrors& errors) override;

 private:
  struct Iface {
    std::string name;
    EthtoolSupport support = EthtoolSupport::kUnsupported;
    std::vector<std::string> raw_names;  // as the source lists them (the kernel's count)
    std::vector<int32_t> slot;           // raw index → offset among this interface's defs; -1 for
                                         // a repeated name
    std::vector<std::string> names;      // distinct names, in order: the interface's defs
    size_t duplicates = 0;
    std::string pause_config = "unknown";
    size_t first_def = 0;  // where its defs start in the table
    std::vector<uint64_t> last_raw;  // ioctl: the previous raw values, to see one go backwards
  };
  // One interface's reading in one cycle.
  struct Reading {
    enum class Kind : uint8_t { kNone, kValues, kSkipped, kError };
    Kind kind = Kind::kNone;
    std::vector<uint64_t> raw_values;  // kValues: parallel to Iface::raw_names
  };

  // The interfaces to read, sorted; the current ones when the listing fails (other than NotFound).
  std::vector<std::string> ListInterfaces(CycleErrors& errors);
  bool Wanted(absl::string_view ifname) const;
  // Sets names (and support) of an interface from its raw string set.
  static void SetNames(Iface& itf, std::vector<std::string> raw_names);
  void DiscoverIoctl(Iface& itf, CycleErrors& errors);
  Reading ReadIoctl(Iface& itf, CycleErrors& errors, bool& changed);
  // A counter went backwards: re-reads the names; true (and new names set) when they changed.
  bool RenamedInPlace(Iface& itf, CycleErrors& errors, bool& changed);
  Reading ReadDump(Iface& itf, CycleErrors& errors, bool& changed);
  absl::StatusOr<std::string> ReadDumpFile(const std::string& ifname);
  void BuildTable();

  EthtoolOptions options_;
  FileSystem* fs_;
  std::unique_ptr<EthtoolIoctl> ioctl_;
  std::vector<Iface> ifaces_;  // sorted by name
  absl::Time last_discovery_ = absl::InfinitePast();
  bool rediscover_ = false;
  uint64_t name_checks_ = 0;
  std::shared_ptr<const SeriesTable> table_;
  std::map<std::string, std::string> dump_paths_;  // kDir: interface → its dump file
};

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_ETHTOOL_ETHTOOL_COLLECTOR_H_
