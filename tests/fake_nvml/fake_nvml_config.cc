#include "tests/fake_nvml/fake_nvml_config.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace ringside::fake_nvml {
namespace {

[[noreturn]] void Bad(int line, const std::string& text) {
  std::fprintf(stderr, "fake_nvml: bad config line %d: %s\n", line, text.c_str());
  std::abort();
}

nv::Return ParseCode(const std::string& s, int line) {
  static const std::pair<const char*, nv::Return> kNames[] = {
      {"SUCCESS", nv::kSuccess},
      {"UNINITIALIZED", nv::kErrorUninitialized},
      {"INVALID_ARGUMENT", nv::kErrorInvalidArgument},
      {"NOT_SUPPORTED", nv::kErrorNotSupported},
      {"NO_PERMISSION", nv::kErrorNoPermission},
      {"NOT_FOUND", nv::kErrorNotFound},
      {"INSUFFICIENT_SIZE", nv::kErrorInsufficientSize},
      {"DRIVER_NOT_LOADED", nv::kErrorDriverNotLoaded},
      {"TIMEOUT", nv::kErrorTimeout},
      {"GPU_IS_LOST", nv::kErrorGpuIsLost},
      {"UNKNOWN", nv::kErrorUnknown},
  };
  for (const auto& [name, code] : kNames) {
    if (s == name) return code;
  }
  char* end = nullptr;
  long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0') Bad(line, "unknown return code " + s);
  return static_cast<nv::Return>(v);
}

long ParseLink(const std::string& s, int line) {
  if (s == "*") return kAll;
  char* end = nullptr;
  long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || v < 0) Bad(line, "bad link " + s);
  return v;
}

unsigned long long ParseU64(const std::string& s, int line) {
  char* end = nullptr;
  unsigned long long v = std::strtoull(s.c_str(), &end, 0);
  if (s.empty() || *end != '\0') Bad(line, "bad number " + s);
  return v;
}

int ParseCounter(const std::string& s, int line) {
  static const char* kNames[] = {"replay", "recovery", "crc_flit", "crc_data", "ecc_data"};
  for (int i = 0; i < 5; ++i) {
    if (s == kNames[i]) return i;
  }
  Bad(line, "unknown counter " + s);
}

FieldEntry ParseFieldValue(const std::string& text, const std::string& type, int line) {
  FieldEntry e;
  if (type == "d") {
    e.type = nv::kValueDouble;
    e.value.d = std::strtod(text.c_str(), nullptr);
  } else if (type == "sll" || type == "si") {
    char* end = nullptr;
    long long v = std::strtoll(text.c_str(), &end, 0);
    if (text.empty() || *end != '\0') Bad(line, "bad number " + text);
    if (type == "sll") {
      e.type = nv::kValueSignedLongLong;
      e.value.sll = v;
    } else {
      e.type = nv::kValueSignedInt;
      e.value.si = static_cast<int>(v);
    }
  } else {
    unsigned long long v = ParseU64(text, line);
    if (type == "ull") {
      e.type = nv::kValueUnsignedLongLong;
      e.value.ull = v;
    } else if (type == "ul") {
      e.type = nv::kValueUnsignedLong;
      e.value.ul = v;
    } else if (type == "ui") {
      e.type = nv::kValueUnsignedInt;
      e.value.ui = static_cast<unsigned int>(v);
    } else if (type == "us") {
      e.type = nv::kValueUnsignedShort;
      e.value.us = static_cast<unsigned short>(v);
    } else {
      Bad(line, "unknown value type " + type);
    }
  }
  return e;
}

}  // namespace

Config LoadConfig() {
  Config cfg;
  const char* path = std::getenv("RINGSIDE_FAKE_NVML_CONFIG");
  if (path == nullptr) return cfg;
  std::ifstream in(path);
  std::string text;
  int line_no = 0;
  while (std::getline(in, text)) {
    ++line_no;
    if (size_t hash = text.find('#'); hash != std::string::npos) text.resize(hash);
    std::istringstream words(text);
    std::vector<std::string> w;
    for (std::string s; words >> s;) w.push_back(s);
    if (w.empty()) continue;
    const std::string& d = w[0];
    FakeGpu* gpu = cfg.gpus.empty() ? nullptr : &cfg.gpus.back();
    auto need = [&](size_t n, bool in_gpu) {
      if (w.size() < n) Bad(line_no, text);
      if (in_gpu && gpu == nullptr) Bad(line_no, "directive before any gpu: " + text);
    };
    if (d == "gpu") {
      if (cfg.gpus.size() == kMaxGpus) Bad(line_no, "too many GPUs");
      cfg.gpus.emplace_back();
    } else if (d == "driver_version") {
      need(2, false);
      cfg.driver_version = w[1];
    } else if (d == "nvml_version") {
      need(2, false);
      cfg.nvml_version = w[1];
    } else if (d == "clocks_event_reasons") {
      need(2, true);
      gpu->clocks_event_reasons =
          w[1] == "-" ? -1 : static_cast<long long>(ParseU64(w[1], line_no));
    } else if (d == "signal") {
      // signal <name> <value|->: one of the GPU signals below.
      need(3, true);
      const long long v = w[2] == "-" ? -1 : static_cast<long long>(ParseU64(w[2], line_no));
      const std::pair<const char*, long long*> kSignals[] = {
          {"sm_clock", &gpu->sm_clock},           {"sm_clock_max", &gpu->sm_clock_max},
          {"temperature", &gpu->temperature},     {"power", &gpu->power},
          {"power_limit", &gpu->power_limit},     {"utilization", &gpu->utilization},
          {"pcie_gen", &gpu->pcie_gen},           {"pcie_gen_max", &gpu->pcie_gen_max},
          {"pcie_width", &gpu->pcie_width},       {"pcie_width_max", &gpu->pcie_width_max},
          {"pcie_replay", &gpu->pcie_replay},     {"ecc_uncorrected", &gpu->ecc_uncorrected},
          {"remap_pending", &gpu->remap_pending}, {"remap_failure", &gpu->remap_failure},
      };
      bool known = false;
      for (const auto& [name, slot] : kSignals) {
        if (w[1] == name) {
          *slot = v;
          known = true;
        }
      }
      if (!known) Bad(line_no, "unknown signal " + w[1]);
    } else if (d == "processes") {
      need(1, true);
      gpu->processes_supported = true;
      gpu->processes.clear();
      for (size_t i = 1; i < w.size(); ++i) {
        gpu->processes.push_back(static_cast<unsigned int>(ParseU64(w[i], line_no)));
      }
    } else if (d == "xid_events") {
      need(2, true);
      gpu->xid_supported = w[1] == "yes";
    } else if (d == "xid") {
      need(2, true);
      gpu->xid_supported = true;
      for (size_t i = 1; i < w.size(); ++i) gpu->xids.push_back(ParseU64(w[i], line_no));
    } else if (d == "gpu_field") {
      // gpu_field <id> <value> [<rate per second> [<since, Unix seconds>]]: a device-scope field.
      need(3, true);
      DeviceField f;
      f.entry = ParseFieldValue(w[2], "ull", line_no);
      if (w.size() > 3) f.rate_per_second = ParseU64(w[3], line_no);
      if (w.size() > 4) f.since_unix = std::strtod(w[4].c_str(), nullptr);
      gpu->device_fields[static_cast<unsigned int>(ParseU64(w[1], line_no))] = f;
    } else if (d == "gpu_field_fail") {
      need(3, true);
      DeviceField f;
      f.entry.ret = ParseCode(w[2], line_no);
      gpu->device_fields[static_cast<unsigned int>(ParseU64(w[1], line_no))] = f;
    } else if (d == "fail" && gpu == nullptr) {
      need(3, false);
      cfg.fails.push_back(FailRule{w[1], ParseCode(w[2], line_no), kAll});
    } else if (d == "fail") {
      need(3, true);
      gpu->fails.push_back(
          FailRule{w[1], ParseCode(w[2], line_no), w.size() > 3 ? ParseLink(w[3], line_no) : kAll});
    } else if (d == "name") {
      need(2, true);
      size_t at = text.find("name") + 4;
      gpu->name = text.substr(text.find_first_not_of(" \t", at));
      gpu->name.erase(gpu->name.find_last_not_of(" \t\r") + 1);
    } else if (d == "uuid") {
      need(2, true);
      gpu->uuid = w[1];
    } else if (d == "pci_bus_id") {
      need(2, true);
      gpu->pci_bus_id = w[1];
    } else if (d == "arch") {
      need(2, true);
      gpu->arch = static_cast<nv::Architecture>(ParseU64(w[1], line_no));
    } else if (d == "links") {
      need(2, true);
      gpu->links = static_cast<unsigned int>(ParseU64(w[1], line_no));
    } else if (d == "link_count_field") {
      need(2, true);
      gpu->link_count_field = w[1] == "yes";
    } else if (d == "down") {
      need(2, true);
      for (size_t i = 1; i < w.size(); ++i) {
        gpu->down.push_back(static_cast<unsigned int>(ParseU64(w[i], line_no)));
      }
    } else if (d == "down_return") {
      need(2, true);
      gpu->down_return = ParseCode(w[1], line_no);
    } else if (d == "counter") {
      need(4, true);
      gpu->counters[{ParseLink(w[2], line_no), ParseCounter(w[1], line_no)}] =
          ParseU64(w[3], line_no);
    } else if (d == "field") {
      need(4, true);
      gpu->fields[{static_cast<unsigned int>(ParseU64(w[1], line_no)), ParseLink(w[2], line_no)}] =
          ParseFieldValue(w[3], w.size() > 4 ? w[4] : "ull", line_no);
    } else if (d == "field_fail") {
      need(4, true);
      FieldEntry e;
      e.ret = ParseCode(w[3], line_no);
      gpu->fields[{static_cast<unsigned int>(ParseU64(w[1], line_no)), ParseLink(w[2], line_no)}] =
          e;
    } else {
      Bad(line_no, text);
    }
  }
  return cfg;
}

}  // namespace ringside::fake_nvml
