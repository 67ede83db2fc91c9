#include "collectors/host/host_collector.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ringside::collectors {
namespace {

// A pressure file is two lines of ~70 bytes, cpu.stat a dozen short lines.
constexpr size_t kMaxFile = 4096;

constexpr const char* kPressureResources[] = {"cpu", "memory", "io"};
// cpu.stat keys exported, with their units.
struct CpuStatKey {
  const char* key;
  Unit unit;
};
constexpr CpuStatKey kCpuStatKeys[] = {{"nr_periods", Unit::kCount},
                                       {"nr_throttled", Unit::kCount},
                                       {"throttled_usec", Unit::kMicroseconds},
                                       {"usage_usec", Unit::kMicroseconds}};

bool SameDefs(const std::vector<SeriesDef>& a, const std::vector<SeriesDef>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].source != b[i].source || a[i].device != b[i].device || a[i].counter != b[i].counter) {
      return false;
    }
  }
  return true;
}

SeriesDef Counter(std::string source, std::string device, std::string counter, Unit unit) {
  SeriesDef d;
  d.source = std::move(source);
  d.device = std::move(device);
  d.counter = std::move(counter);
  d.kind = SeriesKind::kCounter;
  d.width = 64;
  d.unit = unit;
  return d;
}

}  // namespace

absl::StatusOr<std::map<std::string, uint64_t>> ParsePressure(absl::string_view text) {
  std::map<std::string, uint64_t> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (words.empty() || (words[0] != "some" && words[0] != "full")) {
      return absl::DataLossError(absl::StrCat("pressure line \"", line, "\": not some/full"));
    }
    bool found = false;
    for (absl::string_view w : words) {
      if (!absl::ConsumePrefix(&w, "total=")) continue;
      uint64_t v = 0;
      if (!absl::SimpleAtoi(w, &v)) {
        return absl::DataLossError(absl::StrCat("pressure line \"", line, "\": bad total"));
      }
      out[std::string(words[0])] = v;
      found = true;
    }
    if (!found) {
      return absl::DataLossError(absl::StrCat("pressure line \"", line, "\": no total="));
    }
  }
  return out;
}

absl::StatusOr<std::map<std::string, uint64_t>> ParseKeyValues(absl::string_view text) {
  std::map<std::string, uint64_t> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    uint64_t v = 0;
    if (words.size() != 2 || !absl::SimpleAtoi(words[1], &v)) {
      return absl::DataLossError(absl::StrCat("line \"", line, "\": not \"key number\""));
    }
    out[std::string(words[0])] = v;
  }
  return out;
}

bool ValidCgroupPath(absl::string_view path) {
  if (path.empty() || path[0] != '/' || path.size() > 4095) return false;
  for (char c : path) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  if (path == "/") return true;
  for (absl::string_view part : absl::StrSplit(path.substr(1), '/')) {
    if (part.empty() || part == "." || part == "..") return false;
  }
  return true;
}

HostCollector::HostCollector(HostOptions options)
    : options_(std::move(options)),
      fs_(options_.fs != nullptr ? options_.fs : DefaultFileSystem()),
      table_(std::make_shared<SeriesTable>()) {
  buf_.resize(kMaxFile + 1);
}

HostCollector::~HostCollector() {
  for (const auto& [path, fd] : fds_) fs_->Close(fd);
}

absl::StatusOr<absl::string_view> HostCollector::ReadFile(const std::string& path) {
  auto it = fds_.find(path);
  if (it == fds_.end()) {
    absl::StatusOr<int> fd = fs_->Open(path);
    if (!fd.ok()) return fd.status();
    it = fds_.emplace(path, *fd).first;
  }
  absl::StatusOr<size_t> n = fs_->ReadAt0(it->second, buf_.data(), kMaxFile + 1);
  if (!n.ok() || *n > kMaxFile) {
    fs_->Close(it->second);
    fds_.erase(it);
    if (!n.ok()) return n.status();
    return absl::DataLossError(absl::StrCat(path, ": longer than ", kMaxFile, " bytes"));
  }
  return absl::string_view(buf_.data(), *n);
}

void HostCollector::ReadPressure(std::vector<Reading>& out, CycleErrors& errors) {
  for (const char* resource : kPressureResources) {
    const std::string path = absl::StrCat(options_.procfs_root, "/pressure/", resource);
    absl::StatusOr<absl::string_view> text = ReadFile(path);
    if (!text.ok()) {
      // No PSI (kernel before 4.20, or psi=0): no series. Anything else is an error.
      if (!absl::IsNotFound(text.status())) errors.Add(text.status());
      continue;
    }
    absl::StatusOr<std::map<std::string, uint64_t>> totals = ParsePressure(*text);
    if (!totals.ok()) {
      errors.Add(absl::DataLossError(absl::StrCat(path, ": ", totals.status().message())));
      continue;
    }
    for (const char* line : {"some", "full"}) {
      auto it = totals->find(line);
      if (it == totals->end()) continue;  // no cpu "full" before Linux 5.13
      out.push_back(Reading{Counter("host", "", absl::StrCat(resource, "_pressure_", line, "_us"),
                                    Unit::kMicroseconds),
                            Value{it->second, ValueStatus::kOk}});
    }
  }
}

void HostCollector::ReadCgroup(const std::string& cgroup, std::vector<Reading>& out,
                               CycleErrors& errors) {
  if (!ValidCgroupPath(cgroup)) {
    errors.Add(absl::InvalidArgumentError(
        absl::StrCat("cgroup \"", cgroup, "\": not a cgroup v2 path; not read")));
    return;
  }
  const std::string path =
      absl::StrCat(options_.sysfs_root, "/fs/cgroup", cgroup == "/" ? "" : cgroup, "/cpu.stat");
  // Opened afresh every cycle (three system calls): a cgroup removed when its rank ends is then
  // NotFound at once, not a descriptor of a deleted file.
  absl::StatusOr<std::string> text = fs_->ReadSmallFile(path, kMaxFile);
  if (!text.ok()) {
    if (!absl::IsNotFound(text.status())) errors.Add(text.status());  // gone: its rank ended
    return;
  }
  absl::StatusOr<std::map<std::string, uint64_t>> stat = ParseKeyValues(*text);
  if (!stat.ok()) {
    errors.Add(absl::DataLossError(absl::StrCat(path, ": ", stat.status().message())));
    return;
  }
  for (const CpuStatKey& k : kCpuStatKeys) {
    auto it = stat->find(k.key);
    if (it == stat->end()) continue;  // nr_* only with the cpu controller enabled
    out.push_back(
        Reading{Counter("cgroup", cgroup, k.key, k.unit), Value{it->second, ValueStatus::kOk}});
  }
}

void HostCollector::Collect(absl::Time /*now*/, CollectorSnapshot& out, CycleErrors& errors) {
  out.collector = std::string(name());
  std::vector<Reading> readings;
  ReadPressure(readings, errors);
  std::vector<std::string> cgroups;
  if (options_.cgroups) cgroups = options_.cgroups();
  std::sort(cgroups.begin(), cgroups.end());
  cgroups.erase(std::unique(cgroups.begin(), cgroups.end()), cgroups.end());
  for (const std::string& c : cgroups) ReadCgroup(c, readings, errors);
  std::vector<SeriesDef> defs;
  defs.reserve(readings.size());
  for (const Reading& r : readings) defs.push_back(r.def);
  if (!SameDefs(defs, table_->defs)) {
    auto table = std::make_shared<SeriesTable>();
    table->defs = std::move(defs);
    table_ = std::move(table);
  }
  out.table = table_;
  out.values.clear();
  for (const Reading& r : readings) out.values.push_back(r.value);
}

}  // namespace ringside::collectors
