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

void AppendPortKey(const PortRef& ref, std::string& out) {
  out.push_back(ref.cls == PortClass::kRdma ? 'r' : ref.cls == PortClass::kNetdev ? 'n' : 'v');
  out.append(ref.device.data(), ref.device.size());
  out.push_back('\x1f');
  out.append(ref.port.data(), ref.port.size());
}

std::string PortId::Key() const {
  std::string k;
  k.reserve(device.size() + port.size() + 2);
  AppendPortKey(PortRef{cls, device, port}, k);
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

std::string DevicePort(absl::string_view device, absl::string_view port) {
  return absl::StrCat(device, "\x1f", port);
}

}  // namespace

void PortDirectory::MapNetdev(absl::string_view node, absl::string_view netdev,
                              absl::string_view device, absl::string_view port) {
  if (netdev.empty() || device.empty()) return;
  auto& rdma = to_rdma_[node];
  auto [it, fresh] = rdma.try_emplace(netdev);
  if (fresh) ++size_;
  if (!fresh && it->second.device == device && it->second.port == port) return;  // as it was
  it->second = Rdma{std::string(device), std::string(port)};
  to_netdev_[node][DevicePort(device, port)] = std::string(netdev);
  ++version_;
}

PortRef PortDirectory::Canonical(absl::string_view node, absl::string_view source,
                                 absl::string_view device, absl::string_view port) const {
  if (source == "nvlink") return {PortClass::kNvlink, device, port};
  if (IsNetdevSource(source)) {
    auto n = to_rdma_.find(node);
    if (n != to_rdma_.end()) {
      auto it = n->second.find(device);
      if (it != n->second.end()) return {PortClass::kRdma, it->second.device, it->second.port};
    }
    return {PortClass::kNetdev, device, {}};
  }
  return {PortClass::kRdma, device, port};
}

PortId PortDirectory::Resolve(absl::string_view node, absl::string_view source,
                              absl::string_view device, absl::string_view port) const {
  const PortRef ref = Canonical(node, source, device, port);
  PortId id;
  id.cls = ref.cls;
  id.device = std::string(ref.device);
  id.port = std::string(ref.port);
  if (ref.cls == PortClass::kRdma) {
    if (IsNetdevSource(source)) {
      id.netdev = std::string(device);
    } else if (auto n = to_netdev_.find(node); n != to_netdev_.end()) {
      auto it = n->second.find(DevicePort(device, port));
      if (it != n->second.end()) id.netdev = it->second;
    }
  }
  return id;
}

PortRef CanonicalPort(const PortDirectory* directory, absl::string_view node,
                      absl::string_view source, absl::string_view device, absl::string_view port) {
  if (directory != nullptr) return directory->Canonical(node, source, device, port);
  if (source == "nvlink") return {PortClass::kNvlink, device, port};
  if (IsNetdevSource(source)) return {PortClass::kNetdev, device, {}};
  return {PortClass::kRdma, device, port};
}

PortId ResolvePort(const PortDirectory* directory, absl::string_view node, absl::string_view source,
                   absl::string_view device, absl::string_view port) {
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

PortClass SourceClass(absl::string_view source) {
  if (source == "nvlink") return PortClass::kNvlink;
  return IsNetdevSource(source) ? PortClass::kNetdev : PortClass::kRdma;
}

double StepRate(const CounterStep& step) {
  const double s = FastSeconds(step.interval);
  return s > 0 ? static_cast<double>(step.delta) / s : 0;
}

}  // namespace ringside::analysis
