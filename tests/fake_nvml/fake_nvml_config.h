// The fake NVML's configuration: the GPUs it pretends to have, read from the text file named by
// $RINGSIDE_FAKE_NVML_CONFIG (the grammar is described in fake_nvml.cc).
#ifndef RINGSIDE_TESTS_FAKE_NVML_FAKE_NVML_CONFIG_H_
#define RINGSIDE_TESTS_FAKE_NVML_FAKE_NVML_CONFIG_H_

#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "collectors/nvml/nvml_types.h"

namespace ringside::fake_nvml {

namespace nv = ringside::collectors::nvml;

inline constexpr long kAll = -1;  // a rule or value for every link
inline constexpr size_t kMaxGpus = 64;

struct FailRule {
  std::string function;
  nv::Return code;
  long link;  // kAll: every link
};

struct FieldEntry {
  nv::Return ret = nv::kSuccess;
  nv::ValueType type = nv::kValueUnsignedLongLong;
  nv::Value value{};
};

// A device-scope field value (throttle-time counters): base + rate per second since the fake was
// loaded, so a counter ticks by itself between reads.
struct DeviceField {
  FieldEntry entry;
  unsigned long long rate_per_second = 0;
  // When set (Unix seconds), the rate counts from then (wall clock) instead of from the load:
  // the simulator starts a counter ticking at the moment a fault begins.
  double since_unix = 0;
};

struct FakeGpu {
  std::string name = "Fake GPU";
  std::string uuid;
  std::string pci_bus_id;
  nv::Architecture arch = nv::kArchHopper;
  unsigned int links = 0;
  bool link_count_field = true;
  std::vector<unsigned int> down;
  nv::Return down_return = nv::kErrorNotSupported;
  std::map<std::pair<long, int>, unsigned long long> counters;  // (link, counter)
  std::map<std::pair<unsigned int, long>, FieldEntry> fields;   // (field id, link)
  std::vector<FailRule> fails;
  // GPU signals (collectors/nvml/gpu_signals.h); -1 (the default, so that NVLink-only configs
  // keep their series): the call answers NOT_SUPPORTED.
  long long clocks_event_reasons = -1;
  long long sm_clock = -1, sm_clock_max = -1;
  long long temperature = -1, power = -1, power_limit = -1, utilization = -1;
  long long pcie_gen = -1, pcie_gen_max = -1, pcie_width = -1, pcie_width_max = -1;
  long long pcie_replay = -1, ecc_uncorrected = -1;
  long long remap_pending = -1, remap_failure = -1;
  bool processes_supported = false;
  std::vector<unsigned int> processes;   // compute process pids
  bool xid_supported = false;            // XID registration answers (else NOT_SUPPORTED)
  std::vector<unsigned long long> xids;  // in order; each delivered once, after registration
  std::map<unsigned int, DeviceField> device_fields;

  bool IsDown(unsigned int link) const {
    for (unsigned int d : down) {
      if (d == link) return true;
    }
    return false;
  }
};

struct Config {
  std::string driver_version = "999.99-fake";
  std::string nvml_version;  // empty: nvmlSystemGetNVMLVersion answers NOT_SUPPORTED
  std::vector<FailRule> fails;
  std::vector<FakeGpu> gpus;
};

// Reads $RINGSIDE_FAKE_NVML_CONFIG; no GPUs when it is unset. A bad line aborts the process.
Config LoadConfig();

}  // namespace ringside::fake_nvml

#endif  // RINGSIDE_TESTS_FAKE_NVML_FAKE_NVML_CONFIG_H_
