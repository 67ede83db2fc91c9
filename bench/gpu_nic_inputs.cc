#include "bench/gpu_nic_inputs.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "collectors/ethtool/ethtool_text.h"

namespace ringside::bench {
namespace {

namespace fs = std::filesystem;

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc | std::ios::binary);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

std::string FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return std::string(absl::StripAsciiWhitespace(line));
}

}  // namespace

absl::Status WriteFakeNvmlConfig(const std::string& path, int gpus, int links) {
  // Bus numbers of a DGX H100's eight GPUs.
  static const char* kBus[] = {"1B", "43", "52", "61", "9D", "C3", "D1", "DF"};
  std::string text = "driver_version 550.90.07\n";
  for (int g = 0; g < gpus; ++g) {
    absl::StrAppend(&text, "gpu\nname NVIDIA H100 80GB HBM3\n",
                    absl::StrFormat("uuid GPU-%08x-5d2c-4b1a-9e3f-0a1b2c3d4e5f\n", 0x6a1f0000 + g),
                    "pci_bus_id 00000000:", kBus[g % std::size(kBus)], ":00.0\n",
                    "arch 9\n",  // Hopper: link state and the legacy DL counters
                    "links ", links, "\n");
    // Error counters of a healthy fabric after weeks of training, different on every link.
    for (int l = 0; l < links; ++l) {
      const int k = g * links + l;
      absl::StrAppend(&text, "counter replay ", l, " ", 1200 + 37 * k, "\n", "counter recovery ", l,
                      " ", 1 + k % 3, "\n", "counter crc_flit ", l, " ", 48000 + 911 * k, "\n",
                      "counter crc_data ", l, " ", 150 + 13 * k, "\n");
    }
  }
  return WriteFile(path, text);
}

std::vector<std::string> RoceNetdevs(const std::string& sysfs_root) {
  std::set<std::string> out;
  std::error_code ec;
  const fs::path ib = fs::path(sysfs_root) / "class/infiniband";
  for (fs::directory_iterator dev(ib, ec), end; !ec && dev != end; dev.increment(ec)) {
    bool ethernet = false;
    const fs::path ports = dev->path() / "ports";
    std::error_code pec;
    for (fs::directory_iterator p(ports, pec); !pec && p != end; p.increment(pec)) {
      ethernet |= FirstLine(p->path() / "link_layer") == "Ethernet";
    }
    if (!ethernet) continue;
    std::error_code nec;
    for (fs::directory_iterator n(dev->path() / "device/net", nec); !nec && n != end;
         n.increment(nec)) {
      out.insert(n->path().filename());
    }
  }
  return {out.begin(), out.end()};
}

absl::StatusOr<EthtoolDump> Mlx5PfcDump(const std::string& capture) {
  std::ifstream in(capture, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", capture));
  std::stringstream text;
  text << in.rdbuf();
  collectors::EthtoolText parsed = collectors::ParseEthtoolText(text.str());
  if (parsed.malformed > 0 || parsed.names.empty()) {
    return absl::DataLossError(absl::StrCat(capture, ": ", parsed.names.size(), " stats, ",
                                            parsed.malformed, " lines not understood"));
  }
  EthtoolDump d;
  d.names = std::move(parsed.names);
  d.values = std::move(parsed.values);
  d.from_capture = d.names.size();

  // PFC on every priority; the RoCE traffic class (priority 3) is the one that pauses.
  std::vector<std::pair<std::string, uint64_t>> pfc;
  for (int p = 0; p < 8; ++p) {
    const bool roce = p == 3;
    for (const char* dir : {"rx", "tx"}) {
      pfc.emplace_back(absl::StrCat(dir, "_prio", p, "_pause"), roce ? 1843021 : 0);
      pfc.emplace_back(absl::StrCat(dir, "_prio", p, "_pause_duration"), roce ? 92415530 : 0);
    }
    pfc.emplace_back(absl::StrCat("rx_prio", p, "_pause_transition"), roce ? 921477 : 0);
  }
  pfc.emplace_back("tx_pause_storm_warning_events", 2);
  pfc.emplace_back("tx_pause_storm_error_events", 0);

  const std::set<std::string> have(d.names.begin(), d.names.end());
  // After the per-priority traffic counters, where mlx5 lists its per-priority groups.
  auto at = std::find(d.names.begin(), d.names.end(), "tx_prio7_packets");
  size_t pos = at == d.names.end() ? d.names.size() : static_cast<size_t>(at - d.names.begin()) + 1;
  for (auto& [name, value] : pfc) {
    if (have.count(name) > 0) continue;
    d.names.insert(d.names.begin() + static_cast<std::ptrdiff_t>(pos), name);
    d.values.insert(d.values.begin() + static_cast<std::ptrdiff_t>(pos), value);
    ++pos;
  }
  return d;
}

absl::Status WriteEthtoolDumps(const std::string& dir, const std::vector<std::string>& interfaces,
                               const EthtoolDump& dump) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("mkdir ", dir, ": ", ec.message()));
  const std::string text = collectors::FormatEthtoolText(dump.names, dump.values);
  for (const std::string& itf : interfaces) {
    if (absl::Status s = WriteFile(absl::StrCat(dir, "/", itf), text); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace ringside::bench
