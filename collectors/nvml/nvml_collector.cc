#include "collectors/nvml/nvml_collector.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "collectors/common/pci_bus_id.h"
#include "collectors/nvml/nvlink_discovery.h"

namespace ringside::collectors {
namespace {

const char* LegacyCounterName(int id) {
  for (const NvlinkLegacyCounter& c : kNvlinkLegacyCounters) {
    if (c.id == id) return c.name;
  }
  return "?";
}

}  // namespace

double DecodeNvlinkBer(uint64_t packed) {
  const unsigned int exponent = (packed >> nvml::kBerExponentShift) & nvml::kBerExponentMask;
  const unsigned int mantissa = (packed >> nvml::kBerMantissaShift) & nvml::kBerMantissaMask;
  if (mantissa == 15 && exponent == 255) return 0;
  return mantissa * std::pow(10.0, -static_cast<double>(exponent));
}

NvmlCollector::NvmlCollector(NvmlOptions options)
    : options_(std::move(options)), table_(std::make_shared<SeriesTable>()) {
  absl::StatusOr<std::unique_ptr<nvml::NvmlLibrary>> lib =
      nvml::NvmlLibrary::Open(options_.library);
  if (!lib.ok()) {
    status_ = lib.status();
    return;
  }
  lib_ = *std::move(lib);
  if (lib_->fn().system_get_driver_version != nullptr) {
    char version[nvml::kDriverVersionBufferSize] = {};
    if (lib_->fn().system_get_driver_version(version, sizeof(version)) == nvml::kSuccess) {
      driver_version_.assign(version, strnlen(version, sizeof(version)));
    }
  }
  // Which numbering the throttle-time fields have (nvml_types.h): by the driver branch, from the
  // NVML version where the library has it, else the driver version; unknown: the new one.
  std::string nvml_version;
  if (lib_->fn().system_get_nvml_version != nullptr) {
    char version[nvml::kNvmlVersionBufferSize] = {};
    if (lib_->fn().system_get_nvml_version(version, sizeof(version)) == nvml::kSuccess) {
      nvml_version.assign(version, strnlen(version, sizeof(version)));
    }
  }
  unsigned int branch = DriverBranch(nvml_version);
  if (branch == 0) branch = DriverBranch(driver_version_);
  new_throttle_ids_ = branch == 0 || branch >= nvml::kThrottleFieldsNewFromBranch;
  if (options_.xid_events) {
    if (auto x = XidEvents::Create(lib_); x.ok()) xid_ = *std::move(x);
  }
}

NvmlCollector::~NvmlCollector() = default;

void NvmlCollector::Discover(absl::Time now, unsigned int count, CycleErrors& errors) {
  auto table = std::make_shared<SeriesTable>();
  gpus_.clear();
  reads_.clear();
  rediscover_ = false;
  last_discovery_ = now;
  discovered_count_ = count;
  for (unsigned int index = 0; index < count; ++index) {
    absl::StatusOr<GpuPlan> plan = PlanGpu(*lib_, index, driver_version_, errors);
    if (!plan.ok()) {
      errors.Add(plan.status());
      rediscover_ = true;
      continue;
    }
    rediscover_ |= plan->incomplete;
    const uint32_t gpu = static_cast<uint32_t>(gpus_.size());
    gpus_.push_back(Gpu{plan->handle, index, {}, {}, 0});
    Gpu& g = gpus_.back();
    bool xid = false;
    if (xid_ != nullptr) {
      absl::Status st = xid_->Register(plan->handle, index);
      xid = st.ok();
      if (!st.ok() && !absl::IsUnimplemented(st)) errors.Add(st);
    }
    g.signals = GpuSignals::Plan(*lib_, plan->handle, index, new_throttle_ids_, xid, errors);
    if (auto it = plan->info.labels.find("pci_bus_id"); it != plan->info.labels.end()) {
      char sysfs[kPciBusIdSize];
      if (NormalizePciBusId(it->second.data(), it->second.size(), sysfs, sizeof(sysfs))) {
        plan->info.labels["pci_bus_id_sysfs"] = sysfs;
      }
    }
    if (lib_->fn().clocks_event_reasons_symbol != nullptr) {
      plan->info.labels["clocks_event_reasons_api"] = lib_->fn().clocks_event_reasons_symbol;
    }
    auto add = [&](std::string counter, SeriesKind kind, Unit unit, Read read) {
      SeriesDef def;
      def.source = "nvlink";
      def.device = plan->info.device;
      def.port = absl::StrCat(read.link);
      def.counter = std::move(counter);
      def.kind = kind;
      def.width = kind == SeriesKind::kCounter ? 64 : 0;
      def.unit = unit;
      table->defs.push_back(std::move(def));
      reads_.push_back(read);
    };
    for (uint32_t link = 0; link < plan->link_count; ++link) {
      add("link_state", SeriesKind::kState, Unit::kEnum,
          Read{ReadKind::kLinkState, gpu, link, 0, 0});
      for (size_t c = 0; c < kNumNvlinkLegacyCounters; ++c) {
        if (!plan->legacy[c]) continue;
        add(kNvlinkLegacyCounters[c].name, SeriesKind::kCounter, Unit::kCount,
            Read{ReadKind::kLegacyCounter, gpu, link, kNvlinkLegacyCounters[c].id, 0});
      }
      for (const NvlinkField& f : kNvlinkFields) {
        if (std::find(plan->fields.begin(), plan->fields.end(), f.field_id) == plan->fields.end()) {
          continue;
        }
        nvml::FieldValue v{};
        v.field_id = f.field_id;
        v.scope_id = link;
        const uint32_t slot = static_cast<uint32_t>(g.batch.size());
        g.batch.push_back(v);
        add(f.name, f.kind, f.unit,
            Read{ReadKind::kField, gpu, link, static_cast<int>(f.field_id), slot});
      }
    }
    table->info.push_back(std::move(plan->info));
  }
  // The GPU signals follow every NVLink series.
  for (Gpu& g : gpus_) {
    g.offset = table->defs.size();
    g.signals.AddDefs(table->defs);
  }
  table_ = std::move(table);
  last_slow_ = absl::InfinitePast();  // new plans hold no slow readings yet
}

void NvmlCollector::UpdateProcessInfo() {
  std::vector<InfoRecord> processes;
  for (const Gpu& g : gpus_) {
    if (g.signals.pids().empty()) continue;
    InfoRecord r;
    r.source = "gpu_processes";
    r.device = absl::StrCat(g.index);
    r.labels["pids"] = absl::StrJoin(g.signals.pids(), ",");
    processes.push_back(std::move(r));
  }
  std::vector<InfoRecord> old;
  for (const InfoRecord& r : table_->info) {
    if (r.source == "gpu_processes") old.push_back(r);
  }
  const auto same = [](const InfoRecord& a, const InfoRecord& b) {
    return a.device == b.device && a.labels == b.labels;
  };
  if (old.size() == processes.size() &&
      std::equal(old.begin(), old.end(), processes.begin(), same)) {
    return;
  }
  auto table = std::make_shared<SeriesTable>(*table_);
  std::erase_if(table->info, [](const InfoRecord& r) { return r.source == "gpu_processes"; });
  for (InfoRecord& r : processes) table->info.push_back(std::move(r));
  table_ = std::move(table);
}

// One batched field-value read per GPU. A failed call marks every entry with its return code.
void NvmlCollector::ReadBatches() {
  for (Gpu& g : gpus_) {
    if (g.batch.empty()) continue;
    for (nvml::FieldValue& v : g.batch) {
      v.nvml_return = nvml::kErrorUnknown;
      v.value.ull = 0;
    }
    const nvml::Return r = lib_->fn().device_get_field_values(
        g.handle, static_cast<int>(g.batch.size()), g.batch.data());
    if (r != nvml::kSuccess) {
      for (nvml::FieldValue& v : g.batch) v.nvml_return = r;
    }
  }
}

void NvmlCollector::Fail(Value& v, nvml::Return r, bool link_down, const Read& read,
                         CycleErrors& errors) {
  if (r == nvml::kErrorNotSupported || link_down) {
    v.status = ValueStatus::kUnavailable;
    return;
  }
  v.status = ValueStatus::kError;
  if (r == nvml::kErrorGpuIsLost) rediscover_ = true;
  std::string what;
  switch (read.kind) {
    case ReadKind::kLinkState:
      what = nvml::kDeviceGetNvLinkStateSymbol;
      break;
    case ReadKind::kLegacyCounter:
      what = absl::StrCat(nvml::kDeviceGetNvLinkErrorCounterSymbol, "(", LegacyCounterName(read.id),
                          ")");
      break;
    case ReadKind::kField:
      what = absl::StrCat(nvml::kDeviceGetFieldValuesSymbol, "(field ", read.id, ")");
      break;
  }
  errors.Add(lib_->ToStatus(
      r, absl::StrCat("nvml GPU ", gpus_[read.gpu].index, " link ", read.link, ": ", what)));
}

void NvmlCollector::Collect(absl::Time now, CollectorSnapshot& out, CycleErrors& errors) {
  out.collector = std::string(name());
  if (lib_ == nullptr) {  // off: status_ says why
    out.table = table_;
    out.values.clear();
    return;
  }
  const nvml::Functions& fn = lib_->fn();
  unsigned int count = 0;
  if (nvml::Return r = fn.device_get_count(&count); r != nvml::kSuccess) {
    errors.Add(lib_->ToStatus(r, absl::StrCat("nvml: ", nvml::kDeviceGetCountSymbol)));
  } else if (rediscover_ || count != discovered_count_ ||
             now - last_discovery_ >= options_.rediscover_interval) {
    Discover(now, count, errors);
  }

  const bool slow = now - last_slow_ >= options_.slow_interval;
  if (slow) last_slow_ = now;
  size_t total = reads_.size();
  for (const Gpu& g : gpus_) total += g.signals.size();
  out.values.assign(total, Value{});
  for (Gpu& g : gpus_) {
    const XidTally xid = xid_ != nullptr ? xid_->TallyOf(g.index) : XidTally{};
    g.signals.Read(*lib_, slow, xid, out.values.data() + g.offset, errors);
  }
  if (slow) UpdateProcessInfo();
  out.table = table_;
  ReadBatches();
  bool link_down = false;  // of the link being read: its state series comes first
  for (size_t i = 0; i < reads_.size(); ++i) {
    const Read& read = reads_[i];
    Gpu& g = gpus_[read.gpu];
    Value& v = out.values[i];
    switch (read.kind) {
      case ReadKind::kLinkState: {
        nvml::EnableState state;
        link_down = false;
        nvml::Return r = fn.device_get_nvlink_state(g.handle, read.link, &state);
        if (r != nvml::kSuccess) {
          Fail(v, r, false, read, errors);
          break;
        }
        link_down = state != nvml::kFeatureEnabled;
        v = Value{link_down ? 0u : 1u, ValueStatus::kOk};
        break;
      }
      case ReadKind::kLegacyCounter: {
        unsigned long long value = 0;
        nvml::Return r = fn.device_get_nvlink_error_counter(g.handle, read.link, read.id, &value);
        if (r != nvml::kSuccess) {
          Fail(v, r, link_down, read, errors);
          break;
        }
        v = Value{value, ValueStatus::kOk};
        break;
      }
      case ReadKind::kField: {
        const nvml::FieldValue& f = g.batch[read.slot];
        if (f.nvml_return != nvml::kSuccess) {
          Fail(v, f.nvml_return, link_down, read, errors);
          break;
        }
        absl::StatusOr<uint64_t> value = nvml::FieldValueToUint64(f);
        if (!value.ok()) {
          v.status = ValueStatus::kError;
          errors.Add(absl::DataLossError(absl::StrCat("nvml GPU ", g.index, " link ", read.link,
                                                      ": ", value.status().message())));
          break;
        }
        v = Value{*value, ValueStatus::kOk};
        break;
      }
    }
  }
}

}  // namespace ringside::collectors
