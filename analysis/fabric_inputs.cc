#include "analysis/fabric_inputs.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ringside::analysis {

absl::string_view LinkStateName(LinkState s) {
  switch (s) {
    case LinkState::kUnknown:
      return "unknown";
    case LinkState::kDown:
      return "down";
    case LinkState::kUp:
      return "up";
  }
  return "unknown";
}

std::string PortId::Key() const {
  const char c = cls == PortClass::kRdma ? 'r' : cls == PortClass::kNetdev ? 'n' : 'v';
  std::string k;
  k.reserve(device.size() + port.size() + 3);
  k.push_back(c);
  k.append(device);
  k.push_back('\x1f');
  k.append(port);
  return k;
}

std::map<std::string, std::string> PortId::Entity(absl::string_view node) const {
  std::map<std::string, std::string> e;
  e["node"] = std::string(node);
  switch (cls) {
    case PortClass::kRdma:
      e["device"] = device;
      e["port"] = port;
      if (!netdev.empty()) e["netdev"] = netdev;
      break;
    case PortClass::kNetdev:
      e["netdev"] = device;
      break;
    case PortClass::kNvlink:
      e["gpu"] = device;
      e["link"] = port;
      break;
  }
  return e;
}

std::string PortId::Describe() const {
  switch (cls) {
    case PortClass::kRdma:
      if (port.empty() || port == "1") return device;
      return absl::StrCat(device, " port ", port);
    case PortClass::kNetdev:
      return device;
    case PortClass::kNvlink:
      return absl::StrCat("gpu ", device, " link ", port);
  }
  return device;
}

namespace {

bool IsNetdevSource(absl::string_view source) {
  return source == "netdev" || source == "ethtool" || source == "netlink";
}

std::string NodeKey(absl::string_view node, absl::string_view a, absl::string_view b = {}) {
  std::string k;
  k.reserve(node.size() + a.size() + b.size() + 2);
  k.append(node.data(), node.size());
  k.push_back('\0');
  k.append(a.data(), a.size());
  k.push_back('\0');
  k.append(b.data(), b.size());
  return k;
}

}  // namespace

void PortDirectory::MapNetdev(absl::string_view node, absl::string_view netdev,
                              absl::string_view device, absl::string_view port) {
  if (netdev.empty() || device.empty()) return;
  to_rdma_[NodeKey(node, netdev)] = Rdma{std::string(device), std::string(port)};
  to_netdev_[NodeKey(node, device, port)] = std::string(netdev);
}

PortId PortDirectory::Resolve(absl::string_view node, absl::string_view source,
                              absl::string_view device, absl::string_view port) const {
  PortId id;
  if (source == "nvlink") {
    id.cls = PortClass::kNvlink;
    id.device = std::string(device);
    id.port = std::string(port);
    return id;
  }
  if (IsNetdevSource(source)) {
    auto it = to_rdma_.find(NodeKey(node, device));
    if (it == to_rdma_.end()) {
      id.cls = PortClass::kNetdev;
      id.device = std::string(device);
      return id;
    }
    id.cls = PortClass::kRdma;
    id.device = it->second.device;
    id.port = it->second.port;
    id.netdev = std::string(device);
    return id;
  }
  id.cls = PortClass::kRdma;
  id.device = std::string(device);
  id.port = std::string(port);
  if (!to_netdev_.empty()) {
    auto it = to_netdev_.find(NodeKey(node, device, port));
    if (it != to_netdev_.end()) id.netdev = it->second;
  }
  return id;
}

PortId ResolvePort(const PortDirectory* directory, absl::string_view node,
                   absl::string_view source, absl::string_view device, absl::string_view port) {
  static const PortDirectory* const kEmpty = new PortDirectory();
  return (directory ? directory : kEmpty)->Resolve(node, source, device, port);
}

int PrioOf(absl::string_view name, absl::string_view prefix, absl::string_view suffix) {
  if (!absl::StartsWith(name, prefix) || !absl::EndsWith(name, suffix)) return -1;
  if (name.size() <= prefix.size() + suffix.size()) return -1;
  absl::string_view digits =
      name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.size() > 2) return -1;
  for (char c : digits) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return -1;
  }
  int p = 0;
  if (!absl::SimpleAtoi(digits, &p)) return -1;
  return p;
}

double StepRate(const CounterStep& step) {
  const double s = absl::ToDoubleSeconds(step.interval);
  return s > 0 ? static_cast<double>(step.delta) / s : 0;
}

}  // namespace ringside::analysis
