// What the fabric scan reads out of MAD responses: the PMA PortCounters and PortCountersExtended
// fields under the names the kernel's sysfs uses for the same fields, the PortInfo states, and
// the NodeInfo / NodeDescription / PMA ClassPortInfo facts discovery needs.
//
// Every decoder takes the attribute data of one response (the bytes after the MAD header: 64 for
// an SMP, 192 for a PMA GMP, as libibmad returns them) and reads it with libibmad's own field
// table (mad_get_field), so bit offsets come from the library perfquery uses. Pure functions; no
// I/O.
#ifndef RINGSIDE_COLLECTORS_IBMAD_MAD_FIELDS_H_
#define RINGSIDE_COLLECTORS_IBMAD_MAD_FIELDS_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "collectors/common/series.h"

namespace ringside::collectors {

// The attribute data of one MAD response, zero-padded to the size of a whole MAD.
using MadData = std::array<uint8_t, 256>;

// Which query a value comes from.
enum class MadQuery : uint8_t {
  kPortInfo = 0,              // SMP PortInfo (0x15), attribute modifier = port
  kPortCounters = 1,          // PMA PortCounters (0x12), PortSelect = port
  kPortCountersExtended = 2,  // PMA PortCountersExtended (0x1D), PortSelect = port
};
inline constexpr int kMadQueryCount = 3;

// PMA ClassPortInfo.CapabilityMask bits (IBA vol. 1, PerfMgt ClassPortInfo; the kernel's
// IB_PMA_CLASS_CAP_*).
inline constexpr uint16_t kPmaCapAllPortSelect = 1u << 8;
inline constexpr uint16_t kPmaCapExtWidth = 1u << 9;         // 64-bit data + unicast/multicast
inline constexpr uint16_t kPmaCapExtWidthNoIetf = 1u << 10;  // 64-bit data, no unicast/multicast
inline constexpr uint16_t kPmaCapXmitWait = 1u << 12;        // PortCounters.PortXmitWait

// One value of a port scan: the sysfs-style counter name, the query that carries it and the
// libibmad field (an `enum MAD_FIELDS` value) that holds it.
struct ScanField {
  absl::string_view counter;
  MadQuery query;
  int mad_field;
  SeriesKind kind;
  uint8_t width;  // bits as the hardware keeps them; 0 for a state
  Unit unit;
  bool saturates;
};

// The fields a scan reads for one port, in output order: state, phys_state, the PortCounters
// error counters, port_xmit_wait (when the PMA says it has it), then the data and packet counters
// (from PortCountersExtended, 64-bit, when `use_extended` and the PMA has either extended
// capability; unicast/multicast only with kPmaCapExtWidth; otherwise the 32-bit PortCounters
// ones). Widths and units come from PmaCounterSpec.
std::vector<ScanField> PortScanFields(uint16_t pma_cap_mask, bool use_extended);

// Whether PortScanFields reads data counters from PortCountersExtended.
bool UsesExtendedCounters(uint16_t pma_cap_mask, bool use_extended);

// The value of `field` in a response of its query.
uint64_t DecodeScanField(const MadData& data, const ScanField& field);

// NodeInfo (SMP 0x11).
struct NodeInfo {
  uint8_t node_type = 0;  // 1 CA, 2 switch, 3 router
  uint8_t num_ports = 0;
  uint8_t local_port = 0;  // the port the query came in through
  uint64_t system_image_guid = 0;
  uint64_t node_guid = 0;
  uint64_t port_guid = 0;
  uint16_t device_id = 0;
  uint32_t vendor_id = 0;
};
NodeInfo DecodeNodeInfo(const MadData& data);
absl::string_view NodeTypeName(uint8_t node_type);  // "ca", "switch", "router", "unknown"

// NodeDescription (SMP 0x10): up to 64 bytes, cut at the first NUL; bytes outside printable ASCII
// become '?', trailing spaces are dropped.
std::string DecodeNodeDescription(const MadData& data);

// PMA ClassPortInfo (0x01): CapabilityMask.
uint16_t DecodeClassPortInfoCapMask(const MadData& data);

// PortInfo (SMP 0x15): LinkState (1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER) and
// PortPhysicalState (1 Sleep, 2 Polling, 3 Disabled, 4 PortConfigurationTraining, 5 LinkUp,
// 6 LinkErrorRecovery, 7 Phy Test), the same ids as sysfs `state` and `phys_state`.
struct PortStates {
  uint8_t state = 0;
  uint8_t phys_state = 0;
};
PortStates DecodePortStates(const MadData& data);
absl::string_view PortStateName(uint8_t state);
absl::string_view PhysStateName(uint8_t phys_state);

// "0x" and 16 lower-case hex digits: how ibstat prints a node GUID, and the device name of every
// fabric-scan series.
std::string GuidString(uint64_t guid);

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_IBMAD_MAD_FIELDS_H_
