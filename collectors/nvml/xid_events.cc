#include "collectors/nvml/xid_events.h"

#include "absl/strings/str_cat.h"

namespace ringside::collectors {

absl::StatusOr<std::unique_ptr<XidEvents>> XidEvents::Create(
    std::shared_ptr<const nvml::NvmlLibrary> lib) {
  const nvml::Functions& fn = lib->fn();
  if (fn.event_set_create == nullptr) {
    return absl::UnimplementedError(absl::StrCat("NVML library ", lib->library(),
                                                 " lacks the event API (",
                                                 nvml::kEventSetWaitSymbol, "): XID events off"));
  }
  nvml::EventSet set = nullptr;
  if (nvml::Return r = fn.event_set_create(&set); r != nvml::kSuccess) {
    return lib->ToStatus(r, absl::StrCat("nvml: ", nvml::kEventSetCreateSymbol));
  }
  return std::unique_ptr<XidEvents>(new XidEvents(std::move(lib), set));
}

XidEvents::~XidEvents() { lib_->fn().event_set_free(set_); }

absl::Status XidEvents::Register(nvml::Device dev, unsigned int index) {
  absl::MutexLock lock(&mu_);
  if (auto it = index_of_.find(dev); it != index_of_.end() && it->second == index) {
    // Known: answered as the first time (a refused GPU is not asked again).
    return tallies_[index].registered
               ? absl::OkStatus()
               : absl::UnimplementedError(absl::StrCat("nvml GPU ", index, ": XID events refused"));
  }
  const nvml::Return r =
      lib_->fn().device_register_events(dev, nvml::kEventTypeXidCriticalError, set_);
  index_of_[dev] = index;  // a refused GPU is not asked again
  if (r != nvml::kSuccess) {
    tallies_[index].registered = false;
    return lib_->ToStatus(
        r, absl::StrCat("nvml GPU ", index, ": ", nvml::kDeviceRegisterEventsSymbol, "(XID)"));
  }
  tallies_[index].registered = true;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<LinkEvent>> XidEvents::Wait(absl::Duration timeout, absl::Time now) {
  nvml::EventData data{};
  const auto ms =
      static_cast<unsigned int>(std::max<int64_t>(0, absl::ToInt64Milliseconds(timeout)));
  const nvml::Return r = lib_->fn().event_set_wait(set_, &data, ms);
  std::vector<LinkEvent> out;
  if (r == nvml::kErrorTimeout) return out;  // also on an interrupt
  if (r != nvml::kSuccess) {
    return lib_->ToStatus(r, absl::StrCat("nvml: ", nvml::kEventSetWaitSymbol));
  }
  if ((data.event_type & nvml::kEventTypeXidCriticalError) == 0) return out;
  absl::MutexLock lock(&mu_);
  auto it = index_of_.find(data.device);
  if (it == index_of_.end()) return out;  // not ours (cannot happen with one set)
  XidTally& t = tallies_[it->second];
  ++t.count;
  t.last = data.event_data;
  LinkEvent e;
  e.time = now;
  e.source = kXidEventSource;
  e.device = absl::StrCat(it->second);
  e.detail = absl::StrCat("XID ", data.event_data);
  out.push_back(std::move(e));
  return out;
}

XidTally XidEvents::TallyOf(unsigned int index) const {
  absl::MutexLock lock(&mu_);
  auto it = tallies_.find(index);
  return it == tallies_.end() ? XidTally{} : it->second;
}

}  // namespace ringside::collectors
