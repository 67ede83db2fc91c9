// Host-side reasons for a rank to be late (shared/reference/gpu-causes.md §2): the node's pressure
// stall information and the CPU throttling of each rank's cgroup. Both read through the injected
// roots (--procfs-root, --sysfs-root), as every collector.
//
// Series:
//   source "host", device "", port "":  <procfs>/pressure/{cpu,memory,io}, the `total=` of the
//     `some` and `full` lines (µs a task stalled on the resource; "full": all non-idle tasks):
//     cpu_pressure_some_us, cpu_pressure_full_us, memory_pressure_some_us,
//     memory_pressure_full_us, io_pressure_some_us, io_pressure_full_us
//                                            COUNTER 64-bit, Unit::kMicroseconds
//   source "cgroup", device = the cgroup v2 path ("/kubepods.slice/..."), port "":
//     <sysfs>/fs/cgroup/<path>/cpu.stat: nr_periods, nr_throttled (COUNTER, count),
//     throttled_usec, usage_usec (COUNTER, Unit::kMicroseconds)
//
// The cgroups are the ones the NCCL plugin reports for its ranks (HostOptions::cgroups: the
// collective listener's recent ones). A line the kernel does not write (the cpu `full` line
// before Linux 5.13; nr_* without the cpu controller) has no series; a missing pressure folder
// (no PSI) or a cgroup that is gone makes its series unavailable, not an error. Unparsable
// content is a DataLoss error counted in the collector's read errors; a cycle never stops.
#ifndef RINGSIDE_COLLECTORS_HOST_HOST_COLLECTOR_H_
#define RINGSIDE_COLLECTORS_HOST_HOST_COLLECTOR_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "collectors/common/collector.h"
#include "collectors/common/file_system.h"

namespace ringside::collectors {

struct HostOptions {
  std::string procfs_root = "/proc";
  std::string sysfs_root = "/sys";
  // The cgroup v2 paths (relative to the cgroup root, starting with '/') whose cpu.stat to read;
  // called once per cycle on the sampling thread. Null: none.
  std::function<std::vector<std::string>()> cgroups;
  FileSystem* fs = nullptr;  // null: DefaultFileSystem()
};

// One `key value` per line (cpu.stat) or `some|full avg10=… total=N` (PSI): the numbers by key
// ("some", "full" for PSI; the key for cpu.stat). DataLoss for a line that does not parse.
absl::StatusOr<std::map<std::string, uint64_t>> ParsePressure(absl::string_view text);
absl::StatusOr<std::map<std::string, uint64_t>> ParseKeyValues(absl::string_view text);

// A cgroup path the agent will read under <sysfs>/fs/cgroup: starts with '/', no "." or ".."
// component, no empty component, printable ASCII, at most 4095 bytes.
bool ValidCgroupPath(absl::string_view path);

class HostCollector final : public Collector {
 public:
  explicit HostCollector(HostOptions options);
  ~HostCollector() override;

  absl::string_view name() const override { return "host"; }
  void Collect(absl::Time now, CollectorSnapshot& out, CycleErrors& errors) override;

 private:
  struct Reading {
    SeriesDef def;
    Value value;
  };
  // Reads one whole pressure file through a descriptor kept open between cycles. NotFound when
  // absent.
  absl::StatusOr<absl::string_view> ReadFile(const std::string& path);
  void ReadPressure(std::vector<Reading>& out, CycleErrors& errors);
  void ReadCgroup(const std::string& cgroup, std::vector<Reading>& out, CycleErrors& errors);

  HostOptions options_;
  FileSystem* fs_;
  std::map<std::string, int> fds_;  // open descriptors of the pressure files, by path
  std::string buf_;
  std::shared_ptr<const SeriesTable> table_;
};

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_HOST_HOST_COLLECTOR_H_
