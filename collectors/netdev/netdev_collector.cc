#include "collectors/netdev/netdev_collector.h"

#include <algorithm>
#include <array>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "collectors/common/parse.h"

namespace ringside::collectors {
namespace {

constexpr std::array<absl::string_view, 7> kOperStates = {
    "unknown", "notpresent", "down", "lowerlayerdown", "testing", "dormant", "up"};

std::vector<std::string> ListNames(FileSystem* fs, const std::string& dir, bool dirs) {
  std::vector<std::string> names;
  absl::StatusOr<std::vector<DirEntry>> entries = fs->List(dir);
  if (!entries.ok()) return names;
  for (const DirEntry& e : *entries) {
    if (e.is_dir == dirs) names.push_back(e.name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

absl::StatusOr<uint64_t> OperStateId(absl::string_view text) {
  absl::string_view s = FirstLine(text);
  for (size_t i = 0; i < kOperStates.size(); ++i) {
    if (s == kOperStates[i]) return i;
  }
  return absl::DataLossError(absl::StrCat("unknown operstate \"", s.substr(0, 32), "\""));
}

std::map<std::string, RdmaPortRef> MapNetdevsToRdmaPorts(FileSystem* fs,
                                                          const std::string& sysfs_root) {
  std::map<std::string, RdmaPortRef> out;
  const std::string ib_dir = sysfs_root + "/class/infiniband";
  for (const std::string& dev : ListNames(fs, ib_dir, /*dirs=*/true)) {
    const std::string dev_dir = absl::StrCat(ib_dir, "/", dev);
    std::vector<std::string> ports = ListNames(fs, dev_dir + "/ports", true);
    bool found_by_gid = false;
    for (const std::string& port : ports) {
      for (const char* sub : {"/gid_attrs/ndevs", "/gid_attrs/ndev"}) {
        const std::string ndevs = absl::StrCat(dev_dir, "/ports/", port, sub);
        for (const DirEntry& entry : ListFilesSorted(fs, ndevs)) {
          // Unused GID entries fail the read; used ones hold the netdev name.
          absl::StatusOr<std::string> text = fs->ReadSmallFile(ndevs + "/" + entry.name, 64);
          if (!text.ok()) continue;
          std::string netdev(FirstLine(*text));
          if (netdev.empty()) continue;
          out.emplace(netdev, RdmaPortRef{dev, port});
          found_by_gid = true;
        }
      }
    }
    if (found_by_gid) continue;
    // No GID names a netdev (e.g. before an address is configured): the PCI function's netdevs,
    // port = dev_port + 1.
    const std::string pci_net = dev_dir + "/device/net";
    for (const std::string& netdev : ListNames(fs, pci_net, true)) {
      uint64_t dev_port = 0;
      absl::StatusOr<std::string> text =
          fs->ReadSmallFile(absl::StrCat(pci_net, "/", netdev, "/dev_port"), 64);
      if (text.ok()) {
        absl::StatusOr<uint64_t> v = ParseUint64(*text);
        if (v.ok()) dev_port = *v;
      }
      std::string port = std::to_string(dev_port + 1);
      if (std::find(ports.begin(), ports.end(), port) == ports.end()) continue;
      out.emplace(netdev, RdmaPortRef{dev, port});
    }
  }
  return out;
}

NetdevCollector::NetdevCollector(NetdevOptions options, FileSystem* fs)
    : options_(std::move(options)),
      fs_(fs),
      class_dir_(options_.sysfs_root + "/class/net"),
      table_(std::make_shared<SeriesTable>()) {}

void NetdevCollector::Discover(const std::vector<IfKey>& interfaces) {
  auto table = std::make_shared<SeriesTable>();
  polled_.clear();
  std::map<std::string, RdmaPortRef> rdma = MapNetdevsToRdmaPorts(fs_, options_.sysfs_root);
  auto add = [&](const std::string& netdev, std::string counter, SeriesKind kind, uint8_t width,
                 Unit unit, std::string path, Parse parse) {
    SeriesDef def;
    def.source = "netdev";
    def.device = netdev;
    def.counter = std::move(counter);
    def.kind = kind;
    def.width = width;
    def.unit = unit;
    table->defs.push_back(std::move(def));
    polled_.push_back(Polled{PolledFile(fs_, std::move(path)), parse});
  };
  for (const IfKey& itf : interfaces) {
    const std::string dir = absl::StrCat(class_dir_, "/", itf.name);
    InfoRecord info{"netdev", itf.name, "", {}};
    if (auto it = rdma.find(itf.name); it != rdma.end()) {
      info.labels["rdma_device"] = it->second.device;
      info.labels["rdma_port"] = it->second.port;
    }
    table->info.push_back(std::move(info));

    // statistics/*: unsigned long in the kernel, 64-bit here; they wrap.
    for (const DirEntry& f : ListFilesSorted(fs_, dir + "/statistics")) {
      Unit unit = absl::EndsWith(f.name, "_bytes")     ? Unit::kBytes
                  : absl::EndsWith(f.name, "_packets") ? Unit::kPackets
                                                       : Unit::kCount;
      add(itf.name, f.name, SeriesKind::kCounter, 64, unit,
          absl::StrCat(dir, "/statistics/", f.name), Parse::kCounter);
    }
    // Attributes present at discovery (a virtual or old-kernel netdev lacks some).
    std::vector<DirEntry> files = ListFilesSorted(fs_, dir);
    auto has = [&](absl::string_view f) {
      return std::any_of(files.begin(), files.end(), [&](const DirEntry& e) { return e.name == f; });
    };
    // Carrier counters are 32-bit (atomic_t) in the kernel.
    for (const char* c : {"carrier_changes", "carrier_up_count", "carrier_down_count"}) {
      if (has(c)) {
        add(itf.name, c, SeriesKind::kCounter, 32, Unit::kCount, absl::StrCat(dir, "/", c),
            Parse::kCounter);
      }
    }
    if (has("operstate")) {
      add(itf.name, "operstate", SeriesKind::kState, 0, Unit::kEnum, dir + "/operstate",
          Parse::kOperState);
    }
    if (has("speed")) {
      add(itf.name, "speed", SeriesKind::kGauge, 0, Unit::kBytesPerSecond, dir + "/speed",
          Parse::kSpeed);
    }
    if (has("mtu")) {
      add(itf.name, "mtu", SeriesKind::kGauge, 0, Unit::kBytes, dir + "/mtu", Parse::kGauge);
    }
  }
  table_ = std::move(table);
}

void NetdevCollector::Collect(absl::Time now, CollectorSnapshot& out, CycleErrors& errors) {
  if (now - last_device_check_ >= options_.device_check_interval ||
      now - last_discovery_ >= options_.rediscover_interval) {
    last_device_check_ = now;
    std::vector<IfKey> interfaces;
    absl::StatusOr<std::vector<DirEntry>> entries = fs_->List(class_dir_);
    if (entries.ok()) {
      for (const DirEntry& e : *entries) {
        if (e.is_dir) interfaces.push_back(IfKey{e.name, e.inode});
      }
    } else if (!absl::IsNotFound(entries.status())) {
      errors.Add(entries.status());
    }
    std::sort(interfaces.begin(), interfaces.end(),
              [](const IfKey& a, const IfKey& b) { return a.name < b.name; });
    if (interfaces != interfaces_ || now - last_discovery_ >= options_.rediscover_interval) {
      interfaces_ = std::move(interfaces);
      last_discovery_ = now;
      Discover(interfaces_);
    }
  }

  out.collector = std::string(name());
  out.table = table_;
  out.values.assign(polled_.size(), Value{});
  bool lost = false;
  char buf[PolledFile::kMaxContent + 1];
  for (size_t i = 0; i < polled_.size(); ++i) {
    Polled& p = polled_[i];
    Value& v = out.values[i];
    absl::StatusOr<absl::string_view> text = p.file.Read(buf);
    if (!text.ok()) {
      // speed (and carrier) fail with EINVAL while the link is down: no value, not an error.
      if (p.parse == Parse::kSpeed && absl::IsInvalidArgument(text.status())) {
        v.status = ValueStatus::kUnavailable;
        continue;
      }
      if (absl::IsNotFound(text.status())) lost = true;
      v.status = ValueStatus::kError;
      errors.Add(text.status());
      continue;
    }
    absl::StatusOr<uint64_t> parsed;
    switch (p.parse) {
      case Parse::kCounter:
      case Parse::kGauge:
        parsed = ParseUint64(*text);
        break;
      case Parse::kOperState:
        parsed = OperStateId(*text);
        break;
      case Parse::kSpeed: {
        absl::StatusOr<int64_t> mbps = ParseInt64(*text);
        if (mbps.ok() && *mbps < 0) {  // -1: unknown speed
          v.status = ValueStatus::kUnavailable;
          continue;
        }
        parsed = mbps.ok() ? absl::StatusOr<uint64_t>(static_cast<uint64_t>(*mbps) * 125000)
                           : mbps.status();
        break;
      }
    }
    if (!parsed.ok()) {
      v.status = ValueStatus::kError;
      errors.Add(absl::DataLossError(absl::StrCat(p.file.path(), ": ", parsed.status().message())));
      continue;
    }
    v.raw = *parsed;
    v.status = ValueStatus::kOk;
  }
  if (lost) last_discovery_ = last_device_check_ = absl::InfinitePast();
}

}  // namespace ringside::collectors
