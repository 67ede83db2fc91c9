#include "collectors/infiniband/infiniband_collector.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "collectors/common/parse.h"
#include "collectors/infiniband/ib_counter_specs.h"

namespace ringside::collectors {
namespace {

bool IsPortNumber(absl::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), absl::ascii_isdigit);
}

}  // namespace

InfinibandCollector::InfinibandCollector(InfinibandOptions options, FileSystem* fs)
    : options_(std::move(options)),
      fs_(fs),
      class_dir_(options_.sysfs_root + "/class/infiniband"),
      table_(std::make_shared<SeriesTable>()) {}

absl::StatusOr<std::vector<InfinibandCollector::DeviceKey>> InfinibandCollector::ListDevices() {
  absl::StatusOr<std::vector<DirEntry>> entries = fs_->List(class_dir_);
  if (!entries.ok()) {
    if (absl::IsNotFound(entries.status())) return std::vector<DeviceKey>{};  // no RDMA devices
    return entries.status();
  }
  std::vector<DeviceKey> devices;
  for (const DirEntry& e : *entries) {
    if (e.is_dir) devices.push_back(DeviceKey{e.name, e.inode});
  }
  std::sort(devices.begin(), devices.end(),
            [](const DeviceKey& a, const DeviceKey& b) { return a.name < b.name; });
  return devices;
}

void InfinibandCollector::Discover(const std::vector<DeviceKey>& devices) {
  auto table = std::make_shared<SeriesTable>();
  polled_.clear();
  for (const DeviceKey& device : devices) {
    std::string dev_dir = absl::StrCat(class_dir_, "/", device.name);
    // The driver, not the name: rdma-core's udev rules rename mlx5_0 to ibp23s0 / rocep138s0f0.
    std::string driver;
    if (absl::StatusOr<std::string> link = fs_->ReadLink(dev_dir + "/device/driver"); link.ok()) {
      const size_t slash = link->rfind('/');
      driver = slash == std::string::npos ? *link : link->substr(slash + 1);
    }
    InfoRecord info{"infiniband_device", device.name, "", {}};
    for (const char* attr : {"hca_type", "fw_ver", "board_id", "node_guid"}) {
      absl::StatusOr<std::string> text = fs_->ReadSmallFile(absl::StrCat(dev_dir, "/", attr));
      if (text.ok()) info.labels[attr] = std::string(FirstLine(*text));
    }
    table->info.push_back(std::move(info));

    absl::StatusOr<std::vector<DirEntry>> ports = fs_->List(dev_dir + "/ports");
    if (!ports.ok()) continue;
    std::vector<std::string> port_names;
    for (const DirEntry& p : *ports) {
      if (p.is_dir && IsPortNumber(p.name)) port_names.push_back(p.name);
    }
    std::sort(port_names.begin(), port_names.end(), [](const std::string& a, const std::string& b) {
      return a.size() != b.size() ? a.size() < b.size() : a < b;
    });
    for (const std::string& port : port_names) {
      DiscoverPort(device.name, driver, absl::StrCat(dev_dir, "/ports/", port), port, *table);
    }
  }
  table_ = std::move(table);
}

void InfinibandCollector::DiscoverPort(const std::string& device, const std::string& driver,
                                       const std::string& port_dir,
                                       const std::string& port, SeriesTable& table) {
  auto add = [&](std::string source, std::string counter, CounterSpec spec, std::string path,
                 Parse parse) {
    SeriesDef def;
    def.source = std::move(source);
    def.device = device;
    def.port = port;
    def.counter = std::move(counter);
    def.kind = spec.kind;
    def.width = spec.width;
    def.unit = spec.unit;
    def.saturates = spec.saturates;
    def.term_width = spec.term_width;
    table.defs.push_back(std::move(def));
    polled_.push_back(Polled{PolledFile(fs_, std::move(path)), parse});
  };

  // Port attributes, where the driver has them.
  std::vector<DirEntry> attrs = ListFilesSorted(fs_, port_dir);
  auto has = [&](absl::string_view f) {
    return std::any_of(attrs.begin(), attrs.end(), [&](const DirEntry& e) { return e.name == f; });
  };
  CounterSpec state{SeriesKind::kState, 0, Unit::kEnum, false, true};
  for (const char* attr : {"state", "phys_state"}) {
    if (has(attr)) add("infiniband_port", attr, state, port_dir + "/" + attr, Parse::kStateId);
  }
  CounterSpec rate{SeriesKind::kGauge, 0, Unit::kBytesPerSecond, false, true};
  if (has("rate")) add("infiniband_port", "rate", rate, port_dir + "/rate", Parse::kRate);

  InfoRecord info{"infiniband_port", device, port, {}};
  if (absl::StatusOr<std::string> ll = fs_->ReadSmallFile(port_dir + "/link_layer"); ll.ok()) {
    info.labels["link_layer"] = std::string(FirstLine(*ll));
  }
  table.info.push_back(std::move(info));

  // PMA counters. 64-bit data/packet counters come with two tables (core/sysfs.c
  // get_counter_table): EXT_WIDTH, recognised by its unicast/multicast files, and EXT_WIDTH_NOIETF,
  // which has the same files as the 32-bit table. sysfs does not say which (ClassPortInfo does), so
  // NOIETF is recognised by the driver bound to the device (mlx5_core, hfi1), whatever the device
  // is named, or, where there is no driver link (fixtures, software devices), by a data counter
  // already past 32 bits.
  std::vector<DirEntry> counters = ListFilesSorted(fs_, port_dir + "/counters");
  bool extended = driver == "mlx5_core" || driver == "hfi1";
  for (const DirEntry& f : counters) {
    if (f.name == "unicast_xmit_packets" || f.name == "unicast_rcv_packets") extended = true;
  }
  if (!extended && driver.empty()) {
    for (const char* data : {"port_xmit_data", "port_rcv_data"}) {
      absl::StatusOr<std::string> text = fs_->ReadSmallFile(absl::StrCat(port_dir, "/counters/", data));
      uint64_t v = 0;
      if (text.ok() && absl::SimpleAtoi(FirstLine(*text), &v) && v > 0xffffffffu) extended = true;
    }
  }
  for (const DirEntry& f : counters) {
    add("infiniband", f.name, PmaCounterSpec(f.name, extended),
        absl::StrCat(port_dir, "/counters/", f.name), Parse::kCounter);
  }
  for (const DirEntry& f : ListFilesSorted(fs_, port_dir + "/counters_ext")) {
    add("infiniband_ext", f.name, PmaExtCounterSpec(f.name),
        absl::StrCat(port_dir, "/counters_ext/", f.name), Parse::kCounter);
  }
  for (const DirEntry& f : ListFilesSorted(fs_, port_dir + "/hw_counters")) {
    CounterSpec spec = HwCounterSpec(f.name);
    add("infiniband_hw", f.name, spec, absl::StrCat(port_dir, "/hw_counters/", f.name),
        spec.kind == SeriesKind::kGauge ? Parse::kGauge : Parse::kCounter);
  }
}

void InfinibandCollector::Collect(absl::Time now, CollectorSnapshot& out, CycleErrors& errors) {
  if (now - last_device_check_ >= options_.device_check_interval ||
      now - last_discovery_ >= options_.rediscover_interval) {
    last_device_check_ = now;
    absl::StatusOr<std::vector<DeviceKey>> devices = ListDevices();
    if (!devices.ok()) {
      errors.Add(devices.status());
      devices = std::vector<DeviceKey>{};
    }
    if (*devices != devices_ || now - last_discovery_ >= options_.rediscover_interval) {
      devices_ = *devices;
      last_discovery_ = now;
      Discover(devices_);
    }
  }

  out.collector = std::string(name());
  out.table = table_;
  out.values.assign(polled_.size(), Value{});
  bool lost_device = false;
  char buf[PolledFile::kMaxContent + 1];
  for (size_t i = 0; i < polled_.size(); ++i) {
    Polled& p = polled_[i];
    Value& v = out.values[i];
    absl::StatusOr<absl::string_view> text = p.file.Read(buf);
    if (!text.ok()) {
      const absl::Status& st = text.status();
      // A PMA counter whose MAD fails: newer kernels fail the read with EINVAL or ENOSYS where old
      // ones wrote "N/A (no PMA)". Not available, not an error.
      const bool pma = table_->defs[i].source == "infiniband";
      if (pma && (absl::IsInvalidArgument(st) || absl::IsUnimplemented(st))) {
        v.status = ValueStatus::kUnavailable;
        continue;
      }
      if (absl::IsNotFound(st)) lost_device = true;
      v.status = ValueStatus::kError;
      errors.Add(st);
      continue;
    }
    absl::StatusOr<uint64_t> parsed;
    switch (p.parse) {
      case Parse::kCounter:
      case Parse::kGauge:
        parsed = ParseUint64(*text);
        break;
      case Parse::kStateId: {
        absl::StatusOr<IdAndName> s = ParseIdAndName(*text);
        parsed = s.ok() ? absl::StatusOr<uint64_t>(s->id) : s.status();
        break;
      }
      case Parse::kRate:
        parsed = ParseIbRateBytesPerSecond(*text);
        break;
    }
    if (!parsed.ok()) {
      // Old kernels write "N/A (no PMA)" when the MAD fails: not available, not an error.
      // (Checked only here, off the hot path of values that parse.)
      if (IsNotAvailableText(*text)) {
        v.status = ValueStatus::kUnavailable;
        continue;
      }
      v.status = ValueStatus::kError;
      errors.Add(absl::DataLossError(absl::StrCat(p.file.path(), ": ", parsed.status().message())));
      continue;
    }
    v.raw = *parsed;
    v.status = ValueStatus::kOk;
  }
  // A file that vanished means the device or port changed: look again next cycle.
  if (lost_device) last_discovery_ = last_device_check_ = absl::InfinitePast();
}

}  // namespace ringside::collectors
