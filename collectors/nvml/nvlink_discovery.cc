#include "collectors/nvml/nvlink_discovery.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"

namespace ringside::collectors {
namespace {

using nvml::Return;

std::string CString(const char* buf, size_t size) { return std::string(buf, strnlen(buf, size)); }

// The number of NVLinks on the device: field 91 where the driver has it, else probing link indices
// until the state call answers INVALID_ARGUMENT.
unsigned int LinkCount(const nvml::NvmlLibrary& lib, nvml::Device dev, unsigned int index,
                       GpuPlan& plan, CycleErrors& errors) {
  const nvml::Functions& fn = lib.fn();
  if (fn.device_get_field_values != nullptr) {
    nvml::FieldValue v{};
    v.field_id = nvml::kFieldNvLinkLinkCount;
    v.nvml_return = nvml::kErrorUnknown;
    if (fn.device_get_field_values(dev, 1, &v) == nvml::kSuccess &&
        v.nvml_return == nvml::kSuccess) {
      absl::StatusOr<uint64_t> n = nvml::FieldValueToUint64(v);
      if (n.ok() && *n <= kMaxNvlinks) return static_cast<unsigned int>(*n);
      errors.Add(absl::OutOfRangeError(absl::StrCat(
          "nvml GPU ", index, ": implausible NVLink count from field 91; probing links instead")));
    }
  }
  for (unsigned int link = 0; link < kMaxNvlinks; ++link) {
    nvml::EnableState state;
    const Return r = fn.device_get_nvlink_state(dev, link, &state);
    if (r == nvml::kSuccess) continue;
    if (r != nvml::kErrorInvalidArgument && r != nvml::kErrorNotSupported) {
      errors.Add(lib.ToStatus(
          r, absl::StrCat("nvml GPU ", index, " link ", link, ": ",
                          nvml::kDeviceGetNvLinkStateSymbol, " while counting links")));
      plan.incomplete = true;
    }
    return link;
  }
  return kMaxNvlinks;
}

void FillInfo(const nvml::NvmlLibrary& lib, nvml::Device dev, GpuPlan& plan,
              nvml::Architecture arch, bool arch_known, CycleErrors& errors) {
  const nvml::Functions& fn = lib.fn();
  auto where = [&](const char* symbol) {
    return absl::StrCat("nvml GPU ", plan.index, ": ", symbol);
  };
  std::map<std::string, std::string>& labels = plan.info.labels;

  char uuid[nvml::kUuidBufferSize] = {};
  if (Return r = fn.device_get_uuid(dev, uuid, sizeof(uuid)); r == nvml::kSuccess) {
    labels["uuid"] = CString(uuid, sizeof(uuid));
  } else {
    errors.Add(lib.ToStatus(r, where(nvml::kDeviceGetUuidSymbol)));
  }
  if (fn.device_get_name != nullptr) {
    char name[nvml::kNameBufferSize] = {};
    if (Return r = fn.device_get_name(dev, name, sizeof(name)); r == nvml::kSuccess) {
      labels["name"] = CString(name, sizeof(name));
    } else if (r != nvml::kErrorNotSupported) {
      errors.Add(lib.ToStatus(r, where(nvml::kDeviceGetNameSymbol)));
    }
  }
  if (fn.device_get_pci_info != nullptr) {
    // Slack after the struct, in case a future driver writes a longer one.
    struct {
      nvml::PciInfo pci;
      char slack[64];
    } buf = {};
    if (Return r = fn.device_get_pci_info(dev, &buf.pci); r == nvml::kSuccess) {
      labels["pci_bus_id"] = CString(buf.pci.bus_id, sizeof(buf.pci.bus_id));
    } else if (r != nvml::kErrorNotSupported) {
      errors.Add(lib.ToStatus(r, where(nvml::kDeviceGetPciInfoSymbol)));
    }
  }
  if (arch_known) labels["architecture"] = ArchitectureName(arch);
}

// True when every probe answered NOT_SUPPORTED (and there was at least one probe).
struct Probe {
  bool probed = false;
  bool answered = false;  // some answer other than NOT_SUPPORTED
  bool Unsupported() const { return probed && !answered; }
};

}  // namespace

std::string ArchitectureName(nvml::Architecture arch) {
  switch (arch) {
    case nvml::kArchKepler:
      return "kepler";
    case nvml::kArchMaxwell:
      return "maxwell";
    case nvml::kArchPascal:
      return "pascal";
    case nvml::kArchVolta:
      return "volta";
    case nvml::kArchTuring:
      return "turing";
    case nvml::kArchAmpere:
      return "ampere";
    case nvml::kArchAda:
      return "ada";
    case nvml::kArchHopper:
      return "hopper";
    case nvml::kArchBlackwell:
      return "blackwell";
    case nvml::kArchRubin:
      return "rubin";
    case nvml::kArchUnknown:
      return "unknown";
  }
  return absl::StrCat("arch_", arch);
}

absl::StatusOr<GpuPlan> PlanGpu(const nvml::NvmlLibrary& lib, unsigned int index,
                                absl::string_view driver_version, CycleErrors& errors) {
  const nvml::Functions& fn = lib.fn();
  GpuPlan plan;
  plan.index = index;
  const std::string where = absl::StrCat("nvml GPU ", index);
  if (Return r = fn.device_get_handle_by_index(index, &plan.handle); r != nvml::kSuccess) {
    return lib.ToStatus(r, absl::StrCat(where, ": ", nvml::kDeviceGetHandleByIndexSymbol));
  }
  nvml::Device dev = plan.handle;

  nvml::Architecture arch = nvml::kArchUnknown;
  bool arch_known = false;
  if (fn.device_get_architecture != nullptr) {
    arch_known = fn.device_get_architecture(dev, &arch) == nvml::kSuccess;
  }
  plan.info.source = "gpu";
  plan.info.device = absl::StrCat(index);
  FillInfo(lib, dev, plan, arch, arch_known, errors);
  if (!driver_version.empty()) plan.info.labels["driver_version"] = std::string(driver_version);

  plan.link_count = LinkCount(lib, dev, index, plan, errors);
  std::vector<unsigned int> up;
  for (unsigned int link = 0; link < plan.link_count; ++link) {
    nvml::EnableState state;
    Return r = fn.device_get_nvlink_state(dev, link, &state);
    if (r == nvml::kSuccess && state == nvml::kFeatureEnabled) up.push_back(link);
  }

  // Legacy DL counters: a counter is left out only when every up link answers NOT_SUPPORTED.
  // With no link up there is nothing to ask, so the architecture decides.
  const bool nvlink5 = arch_known && arch != nvml::kArchUnknown && arch >= nvml::kArchBlackwell;
  bool any_legacy_missing = false;
  for (size_t c = 0; c < kNumNvlinkLegacyCounters; ++c) {
    Probe probe;
    for (unsigned int link : up) {
      unsigned long long value;
      probe.probed = true;
      Return r = fn.device_get_nvlink_error_counter(dev, link, kNvlinkLegacyCounters[c].id, &value);
      if (r != nvml::kErrorNotSupported) {
        probe.answered = true;
        break;
      }
    }
    plan.legacy[c] = probe.probed ? !probe.Unsupported() : !nvlink5;
    any_legacy_missing |= !plan.legacy[c];
  }

  // NVLink5 field values, where the legacy call answers NOT_SUPPORTED and the driver has the
  // field-values API. A field is left out only when every up link answers NOT_SUPPORTED for it.
  if (any_legacy_missing && fn.device_get_field_values != nullptr) {
    std::vector<nvml::FieldValue> batch;
    for (unsigned int link : up) {
      for (const NvlinkField& f : kNvlinkFields) {
        nvml::FieldValue v{};
        v.field_id = f.field_id;
        v.scope_id = link;
        v.nvml_return = nvml::kErrorUnknown;
        batch.push_back(v);
      }
    }
    const bool call_ok =
        !batch.empty() && fn.device_get_field_values(dev, static_cast<int>(batch.size()),
                                                     batch.data()) == nvml::kSuccess;
    for (const NvlinkField& f : kNvlinkFields) {
      const bool unsupported =
          call_ok && std::all_of(batch.begin(), batch.end(), [&](const nvml::FieldValue& v) {
            return v.field_id != f.field_id || v.nvml_return == nvml::kErrorNotSupported;
          });
      if (!unsupported) plan.fields.push_back(f.field_id);
    }
  }

  bool any_legacy = false;
  for (bool b : plan.legacy) any_legacy |= b;
  const char* api = any_legacy ? (plan.fields.empty() ? "legacy" : "legacy+nvlink5_fields")
                               : (plan.fields.empty() ? "none" : "nvlink5_fields");
  plan.info.labels["nvlink_count"] = absl::StrCat(plan.link_count);
  plan.info.labels["nvlink_error_api"] = api;
  return plan;
}

}  // namespace ringside::collectors
