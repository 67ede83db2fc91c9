#include "collectors/ethtool/ethtool_collector.h"

#include <algorithm>
#include <cerrno>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "collectors/ethtool/ethtool_text.h"

namespace ringside::collectors {

absl::StatusOr<EthtoolSource> ParseEthtoolSource(absl::string_view flag) {
  EthtoolSource source;
  if (flag == "ioctl") return source;
  if (absl::StartsWith(flag, "dir:") && flag.size() > 4) {
    source.kind = EthtoolSource::Kind::kDir;
    source.dir = std::string(flag.substr(4));
    return source;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("ethtool source must be \"ioctl\" or \"dir:PATH\", not \"", flag, "\""));
}

EthtoolCollector::EthtoolCollector(EthtoolOptions options, FileSystem* fs,
                                   std::unique_ptr<EthtoolIoctl> ioctl)
    : options_(std::move(options)),
      fs_(fs),
      ioctl_(std::move(ioctl)),
      table_(std::make_shared<SeriesTable>()) {
  if (options_.source.kind == EthtoolSource::Kind::kIoctl && !ioctl_) ioctl_ = NewEthtoolIoctl();
}

bool EthtoolCollector::Wanted(absl::string_view ifname) const {
  if (options_.interfaces.empty()) return true;
  return std::find(options_.interfaces.begin(), options_.interfaces.end(), ifname) !=
         options_.interfaces.end();
}

std::vector<std::string> EthtoolCollector::ListInterfaces(CycleErrors& errors) {
  std::vector<std::string> names;
  const bool from_dir = options_.source.kind == EthtoolSource::Kind::kDir;
  const std::string dir = from_dir ? options_.source.dir : options_.sysfs_root + "/class/net";
  absl::StatusOr<std::vector<DirEntry>> entries = fs_->List(dir);
  if (!entries.ok()) {
    // No class/net at all is an empty machine; a missing dump folder is a configuration error.
    if (from_dir || !absl::IsNotFound(entries.status())) errors.Add(entries.status());
    if (!absl::IsNotFound(entries.status())) {
      for (const Iface& itf : ifaces_) names.push_back(itf.name);  // keep what we have
    }
    return names;
  }
  dump_paths_.clear();
  for (const DirEntry& e : *entries) {
    if (!Wanted(e.name)) continue;
    if (!from_dir) {
      if (e.is_dir) names.push_back(e.name);
      continue;
    }
    if (e.name.empty() || e.name[0] == '.') continue;  // temporary files of an atomic writer
    std::string path = absl::StrCat(dir, "/", e.name);
    if (e.is_dir) {
      std::vector<DirEntry> inner = ListFilesSorted(fs_, path);
      if (std::none_of(inner.begin(), inner.end(),
                       [](const DirEntry& f) { return f.name == "statistics"; })) {
        continue;
      }
      path += "/statistics";
    }
    dump_paths_[e.name] = std::move(path);
    names.push_back(e.name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

void EthtoolCollector::SetNames(Iface& itf, std::vector<std::string> raw_names) {
  itf.raw_names = std::move(raw_names);
  itf.last_raw.clear();
  itf.names.clear();
  itf.slot.assign(itf.raw_names.size(), -1);
  itf.duplicates = 0;
  std::unordered_map<std::string, int32_t> seen;
  for (size_t i = 0; i < itf.raw_names.size(); ++i) {
    auto [it, inserted] = seen.emplace(itf.raw_names[i], static_cast<int32_t>(itf.names.size()));
    if (!inserted) {
      ++itf.duplicates;  // the first of a repeated name keeps it
      continue;
    }
    itf.slot[i] = it->second;
    itf.names.push_back(itf.raw_names[i]);
  }
  itf.support = itf.names.empty() ? EthtoolSupport::kUnsupported : EthtoolSupport::kSupported;
}

void EthtoolCollector::DiscoverIoctl(Iface& itf, CycleErrors& errors) {
  absl::StatusOr<std::vector<std::string>> set = ioctl_->GetStringSet(itf.name);
  if (set.ok()) {
    SetNames(itf, *std::move(set));
  } else if (absl::IsUnimplemented(set.status())) {
    SetNames(itf, {});  // the driver has no statistics: stated in ethtool_caps, not an error
  } else {
    itf.support = EthtoolSupport::kError;
    if (absl::IsNotFound(set.status())) {
      rediscover_ = true;  // gone since the listing: the next cycle lists again
    } else {
      errors.Add(set.status());
    }
    return;
  }
  absl::StatusOr<EthtoolPauseParam> pause = ioctl_->GetPauseParam(itf.name);
  if (pause.ok()) {
    itf.pause_config = FormatPauseConfig(*pause);
  } else {
    itf.pause_config = absl::IsUnimplemented(pause.status()) ? "unsupported" : "unknown";
  }
}

EthtoolCollector::Reading EthtoolCollector::ReadIoctl(Iface& itf, CycleErrors& errors,
                                                      bool& changed) {
  Reading r;
  if (itf.support != EthtoolSupport::kSupported) return r;
  absl::StatusOr<EthtoolStats> stats = ioctl_->GetStats(itf.name, itf.raw_names.size());
  if (!stats.ok()) {
    errors.Add(stats.status());
    if (absl::IsNotFound(stats.status())) rediscover_ = true;
    r.kind = Reading::Kind::kError;
    return r;
  }
  if (stats->outcome == EthtoolStats::Outcome::kOk &&
      stats->values.size() == itf.raw_names.size()) {
    // A rename that keeps the count (mlx5: PFC moved from priority 3 to 4) is invisible to the
    // count check, on every kernel. Its sign is a slot whose counter went backwards (the new
    // name's counter is usually lower than the old one's): then re-read the names, and if they
    // differ, skip this sample instead of filing its values under stale names.
    bool backwards = false;
    if (itf.last_raw.size() == stats->values.size()) {
      for (size_t k = 0; k < stats->values.size() && !backwards; ++k) {
        backwards = stats->values[k] < itf.last_raw[k];
      }
    }
    itf.last_raw = stats->values;
    if (!backwards || !RenamedInPlace(itf, errors, changed)) {
      r.kind = Reading::Kind::kValues;
      r.raw_values = std::move(stats->values);
      return r;
    }
    r.kind = Reading::Kind::kSkipped;
    return r;
  }
  // The driver's set is no longer the one we hold names for: take the new names now and skip
  // this sample (its values may belong to either set).
  r.kind = Reading::Kind::kSkipped;
  absl::StatusOr<std::vector<std::string>> set = ioctl_->GetStringSet(itf.name);
  if (set.ok()) {
    if (*set != itf.raw_names) {  // else: changed and changed back; the table stands
      SetNames(itf, *std::move(set));
      changed = true;
    }
  } else if (absl::IsUnimplemented(set.status())) {
    SetNames(itf, {});
    changed = true;
  } else {
    // Still racing or gone: keep the old names, look again at the next cycle.
    if (!absl::IsNotFound(set.status())) errors.Add(set.status());
    rediscover_ = true;
  }
  return r;
}

bool EthtoolCollector::RenamedInPlace(Iface& itf, CycleErrors& errors, bool& changed) {
  ++name_checks_;
  absl::StatusOr<std::vector<std::string>> set = ioctl_->GetStringSet(itf.name);
  if (!set.ok()) {
    if (!absl::IsNotFound(set.status())) errors.Add(set.status());
    rediscover_ = true;
    return false;  // keep the sample: the count check just said the set is the one we hold
  }
  if (*set == itf.raw_names) return false;  // a real counter reset (driver reload)
  SetNames(itf, *std::move(set));
  itf.last_raw.clear();
  changed = true;
  return true;
}

absl::StatusOr<std::string> EthtoolCollector::ReadDumpFile(const std::string& ifname) {
  auto it = dump_paths_.find(ifname);
  const std::string path =
      it != dump_paths_.end() ? it->second : absl::StrCat(options_.source.dir, "/", ifname);
  absl::StatusOr<int> fd = fs_->Open(path);
  if (!fd.ok()) return fd.status();
  std::string buf;
  size_t cap = std::min<size_t>(64 << 10, std::max<size_t>(options_.max_dump_bytes, 1));
  for (;;) {
    buf.resize(cap + 1);
    absl::StatusOr<size_t> n = fs_->ReadAt0(*fd, buf.data(), buf.size());
    if (!n.ok()) {
      fs_->Close(*fd);
      return absl::Status(n.status().code(), absl::StrCat(path, ": ", n.status().message()));
    }
    if (*n <= cap) {
      fs_->Close(*fd);
      buf.resize(*n);
      return buf;
    }
    if (cap >= options_.max_dump_bytes) {
      fs_->Close(*fd);
      return absl::DataLossError(
          absl::StrCat(path, ": larger than ", options_.max_dump_bytes, " bytes"));
    }
    cap = std::min(cap * 4, options_.max_dump_bytes);
  }
}

EthtoolCollector::Reading EthtoolCollector::ReadDump(Iface& itf, CycleErrors& errors,
                                                     bool& changed) {
  Reading r;
  absl::StatusOr<std::string> text = ReadDumpFile(itf.name);
  if (!text.ok()) {
    if (absl::IsNotFound(text.status())) rediscover_ = true;
    errors.Add(text.status());
    r.kind = Reading::Kind::kError;
    return r;
  }
  EthtoolText parsed = ParseEthtoolText(*text);
  if (parsed.malformed > 0) {
    errors.Add(absl::DataLossError(absl::StrCat("ethtool dump of ", itf.name, ": ",
                                                parsed.malformed, " lines not understood, e.g. \"",
                                                parsed.first_malformed, "\"")));
  }
  // "ERROR: <errno>": the capture failed there. EOPNOTSUPP means the device has no statistics.
  if (parsed.error && *parsed.error != EOPNOTSUPP) {
    errors.Add(absl::Status(
        ErrnoStatus(*parsed.error, "ethtool capture", itf.name).code(),
        absl::StrCat("ethtool dump of ", itf.name, " records ERROR: ", *parsed.error)));
  }
  // A failed capture without stats says "error"; no stats otherwise says "unsupported".
  const bool failed = parsed.error && *parsed.error != EOPNOTSUPP;
  const EthtoolSupport support = !parsed.names.empty() ? EthtoolSupport::kSupported
                                 : failed              ? EthtoolSupport::kError
                                                       : EthtoolSupport::kUnsupported;
  if (parsed.names != itf.raw_names || support != itf.support ||
      parsed.duplicates.size() != itf.duplicates) {
    SetNames(itf, std::move(parsed.names));
    itf.support = support;
    itf.duplicates = parsed.duplicates.size();
    changed = true;
  }
  if (itf.support != EthtoolSupport::kSupported) return r;
  r.kind = Reading::Kind::kValues;
  r.raw_values = std::move(parsed.values);
  return r;
}

void EthtoolCollector::BuildTable() {
  auto table = std::make_shared<SeriesTable>();
  for (Iface& itf : ifaces_) {
    table->info.push_back(EthtoolCapabilitiesRecord(itf.name, itf.support, itf.names.size(),
                                                    EthtoolCapabilitiesFromNames(itf.names),
                                                    itf.pause_config, itf.duplicates));
    itf.first_def = table->defs.size();
    for (const std::string& n : itf.names) table->defs.push_back(EthtoolSeriesDef(itf.name, n));
  }
  table_ = std::move(table);
}

void EthtoolCollector::Collect(absl::Time now, CollectorSnapshot& out, CycleErrors& errors) {
  const bool from_dir = options_.source.kind == EthtoolSource::Kind::kDir;
  std::vector<std::string> names = ListInterfaces(errors);
  bool same_list = names.size() == ifaces_.size();
  for (size_t i = 0; same_list && i < names.size(); ++i) same_list = names[i] == ifaces_[i].name;

  bool dirty = false;
  if (!same_list || rediscover_ || now - last_discovery_ >= options_.rediscover_interval) {
    rediscover_ = false;
    last_discovery_ = now;
    std::vector<Iface> next;
    next.reserve(names.size());
    for (std::string& n : names) {
      auto old = std::find_if(ifaces_.begin(), ifaces_.end(),
                              [&](const Iface& itf) { return itf.name == n; });
      if (from_dir && old != ifaces_.end()) {
        next.push_back(std::move(*old));  // a dump is read whole every cycle anyway
        continue;
      }
      Iface itf;
      itf.name = std::move(n);
      if (from_dir) {
        itf.support = EthtoolSupport::kError;  // until its first reading
      } else {
        DiscoverIoctl(itf, errors);
      }
      next.push_back(std::move(itf));
    }
    ifaces_ = std::move(next);
    dirty = true;
  }

  std::vector<Reading> readings(ifaces_.size());
  for (size_t i = 0; i < ifaces_.size(); ++i) {
    bool changed = false;
    readings[i] =
        from_dir ? ReadDump(ifaces_[i], errors, changed) : ReadIoctl(ifaces_[i], errors, changed);
    dirty = dirty || changed;
  }
  if (dirty) BuildTable();

  out.collector = std::string(name());
  out.table = table_;
  out.timestamp = now;
  out.values.assign(table_->defs.size(), Value{});
  for (size_t i = 0; i < ifaces_.size(); ++i) {
    const Iface& itf = ifaces_[i];
    const Reading& r = readings[i];
    if (r.kind == Reading::Kind::kError) {
      for (size_t k = 0; k < itf.names.size(); ++k) {
        out.values[itf.first_def + k].status = ValueStatus::kError;
      }
      continue;
    }
    if (r.kind != Reading::Kind::kValues) continue;
    const size_t n = std::min(r.raw_values.size(), itf.slot.size());
    for (size_t k = 0; k < n; ++k) {
      if (itf.slot[k] < 0) continue;
      out.values[itf.first_def + itf.slot[k]] = Value{r.raw_values[k], ValueStatus::kOk};
    }
  }
}

}  // namespace ringside::collectors
