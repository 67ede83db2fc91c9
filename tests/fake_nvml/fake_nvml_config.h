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

  bool IsDown(unsigned int link) const {
    for (unsigned int d : down) {
      if (d == link) return true;
    }
    return false;
  }
};

struct Config {
  std::string driver_version = "999.99-fake";
  std::vector<FailRule> fails;
  std::vector<FakeGpu> gpus;
};

// Reads $RINGSIDE_FAKE_NVML_CONFIG; no GPUs when it is unset. A bad line aborts the process.
Config LoadConfig();

}  // namespace ringside::fake_nvml

#endif  // RINGSIDE_TESTS_FAKE_NVML_FAKE_NVML_CONFIG_H_
