#include "collectors/ibmad/mad_fields.h"

#include <infiniband/mad.h>

#include "absl/strings/str_format.h"
#include "collectors/infiniband/ib_counter_specs.h"

namespace ringside::collectors {
namespace {

struct FieldName {
  absl::string_view counter;
  MAD_FIELDS field;
};

// PortCounters error counters, in the order perfquery prints them. QP1Dropped has no sysfs file
// and is not read.
constexpr FieldName kErrorFields[] = {
    {"symbol_error", IB_PC_ERR_SYM_F},
    {"link_error_recovery", IB_PC_LINK_RECOVERS_F},
    {"link_downed", IB_PC_LINK_DOWNED_F},
    {"port_rcv_errors", IB_PC_ERR_RCV_F},
    {"port_rcv_remote_physical_errors", IB_PC_ERR_PHYSRCV_F},
    {"port_rcv_switch_relay_errors", IB_PC_ERR_SWITCH_REL_F},
    {"port_xmit_discards", IB_PC_XMT_DISCARDS_F},
    {"port_xmit_constraint_errors", IB_PC_ERR_XMTCONSTR_F},
    {"port_rcv_constraint_errors", IB_PC_ERR_RCVCONSTR_F},
    {"local_link_integrity_errors", IB_PC_ERR_LOCALINTEG_F},
    {"excessive_buffer_overrun_errors", IB_PC_ERR_EXCESS_OVR_F},
    {"VL15_dropped", IB_PC_VL15_DROPPED_F},
};

constexpr FieldName kBasicDataFields[] = {
    {"port_xmit_data", IB_PC_XMT_BYTES_F},
    {"port_rcv_data", IB_PC_RCV_BYTES_F},
    {"port_xmit_packets", IB_PC_XMT_PKTS_F},
    {"port_rcv_packets", IB_PC_RCV_PKTS_F},
};

constexpr FieldName kExtDataFields[] = {
    {"port_xmit_data", IB_PC_EXT_XMT_BYTES_F},
    {"port_rcv_data", IB_PC_EXT_RCV_BYTES_F},
    {"port_xmit_packets", IB_PC_EXT_XMT_PKTS_F},
    {"port_rcv_packets", IB_PC_EXT_RCV_PKTS_F},
};

constexpr FieldName kExtCastFields[] = {
    {"unicast_xmit_packets", IB_PC_EXT_XMT_UPKTS_F},
    {"unicast_rcv_packets", IB_PC_EXT_RCV_UPKTS_F},
    {"multicast_xmit_packets", IB_PC_EXT_XMT_MPKTS_F},
    {"multicast_rcv_packets", IB_PC_EXT_RCV_MPKTS_F},
};

ScanField PmaField(const FieldName& f, MadQuery query, bool extended_width) {
  const CounterSpec spec = PmaCounterSpec(f.counter, extended_width);
  return ScanField{f.counter, query, f.field, spec.kind, spec.width, spec.unit, spec.saturates};
}

// mad_get_field and friends take a non-const buffer but only read it.
uint8_t* Bytes(const MadData& data) { return const_cast<uint8_t*>(data.data()); }

}  // namespace

bool UsesExtendedCounters(uint16_t pma_cap_mask, bool use_extended) {
  return use_extended && (pma_cap_mask & (kPmaCapExtWidth | kPmaCapExtWidthNoIetf)) != 0;
}

std::vector<ScanField> PortScanFields(uint16_t pma_cap_mask, bool use_extended) {
  std::vector<ScanField> fields;
  fields.push_back(
      {"state", MadQuery::kPortInfo, IB_PORT_STATE_F, SeriesKind::kState, 0, Unit::kEnum, false});
  fields.push_back({"phys_state", MadQuery::kPortInfo, IB_PORT_PHYS_STATE_F, SeriesKind::kState, 0,
                    Unit::kEnum, false});
  const bool extended = UsesExtendedCounters(pma_cap_mask, use_extended);
  for (const FieldName& f : kErrorFields) {
    fields.push_back(PmaField(f, MadQuery::kPortCounters, extended));
  }
  if (pma_cap_mask & kPmaCapXmitWait) {
    fields.push_back(
        PmaField({"port_xmit_wait", IB_PC_XMT_WAIT_F}, MadQuery::kPortCounters, extended));
  }
  if (extended) {
    for (const FieldName& f : kExtDataFields) {
      fields.push_back(PmaField(f, MadQuery::kPortCountersExtended, true));
    }
    if (pma_cap_mask & kPmaCapExtWidth) {
      for (const FieldName& f : kExtCastFields) {
        fields.push_back(PmaField(f, MadQuery::kPortCountersExtended, true));
      }
    }
  } else {
    for (const FieldName& f : kBasicDataFields) {
      fields.push_back(PmaField(f, MadQuery::kPortCounters, false));
    }
  }
  return fields;
}

uint64_t DecodeScanField(const MadData& data, const ScanField& field) {
  const auto f = static_cast<MAD_FIELDS>(field.mad_field);
  // The 64-bit PortCountersExtended fields are byte aligned; everything else fits 32 bits.
  if (field.query == MadQuery::kPortCountersExtended) return mad_get_field64(Bytes(data), 0, f);
  return mad_get_field(Bytes(data), 0, f);
}

NodeInfo DecodeNodeInfo(const MadData& data) {
  uint8_t* b = Bytes(data);
  NodeInfo n;
  n.node_type = static_cast<uint8_t>(mad_get_field(b, 0, IB_NODE_TYPE_F));
  n.num_ports = static_cast<uint8_t>(mad_get_field(b, 0, IB_NODE_NPORTS_F));
  n.local_port = static_cast<uint8_t>(mad_get_field(b, 0, IB_NODE_LOCAL_PORT_F));
  n.system_image_guid = mad_get_field64(b, 0, IB_NODE_SYSTEM_GUID_F);
  n.node_guid = mad_get_field64(b, 0, IB_NODE_GUID_F);
  n.port_guid = mad_get_field64(b, 0, IB_NODE_PORT_GUID_F);
  n.device_id = static_cast<uint16_t>(mad_get_field(b, 0, IB_NODE_DEVID_F));
  n.vendor_id = mad_get_field(b, 0, IB_NODE_VENDORID_F);
  return n;
}

absl::string_view NodeTypeName(uint8_t node_type) {
  switch (node_type) {
    case IB_NODE_CA:
      return "ca";
    case IB_NODE_SWITCH:
      return "switch";
    case IB_NODE_ROUTER:
      return "router";
    default:
      return "unknown";
  }
}

std::string DecodeNodeDescription(const MadData& data) {
  constexpr size_t kMax = IB_SMP_DATA_SIZE;  // NodeDescription is 64 bytes
  std::string s;
  for (size_t i = 0; i < kMax && data[i] != 0; ++i) {
    const char c = static_cast<char>(data[i]);
    s.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

uint16_t DecodeClassPortInfoCapMask(const MadData& data) {
  return static_cast<uint16_t>(mad_get_field(Bytes(data), 0, IB_CPI_CAPMASK_F));
}

PortStates DecodePortStates(const MadData& data) {
  PortStates s;
  s.state = static_cast<uint8_t>(mad_get_field(Bytes(data), 0, IB_PORT_STATE_F));
  s.phys_state = static_cast<uint8_t>(mad_get_field(Bytes(data), 0, IB_PORT_PHYS_STATE_F));
  return s;
}

absl::string_view PortStateName(uint8_t state) {
  switch (state) {
    case 0:
      return "NOP";
    case 1:
      return "DOWN";
    case 2:
      return "INIT";
    case 3:
      return "ARMED";
    case 4:
      return "ACTIVE";
    case 5:
      return "ACTIVE_DEFER";
    default:
      return "UNKNOWN";
  }
}

absl::string_view PhysStateName(uint8_t phys_state) {
  switch (phys_state) {
    case 1:
      return "Sleep";
    case 2:
      return "Polling";
    case 3:
      return "Disabled";
    case 4:
      return "PortConfigurationTraining";
    case 5:
      return "LinkUp";
    case 6:
      return "LinkErrorRecovery";
    case 7:
      return "Phy Test";
    default:
      return "<unknown>";
  }
}

std::string GuidString(uint64_t guid) { return absl::StrFormat("0x%016x", guid); }

}  // namespace ringside::collectors
