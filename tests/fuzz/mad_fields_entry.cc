// MadFields: the MAD reply decoders of collectors/ibmad/mad_fields.h on arbitrary attribute data.
#include <string>
#include <vector>

#include "collectors/ibmad/mad_fields.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_entries.h"
#include "tests/fuzz/fuzz_input.h"

namespace ringside::fuzz {

namespace c = ringside::collectors;

bool MadFields(const uint8_t* data, size_t size) {
  if (size < 4) return false;
  FuzzInput in(data, size);
  const uint8_t kind = in.U8() % 6;
  const uint16_t cap_mask = in.U16();
  const bool use_extended = (in.U8() & 1) != 0;
  c::MadData mad{};
  in.Fill(mad.data(), mad.size());

  switch (kind) {
    case 0: {  // NodeInfo
      const c::NodeInfo n = c::DecodeNodeInfo(mad);
      const absl::string_view type = c::NodeTypeName(n.node_type);
      FUZZ_CHECK(c::GuidString(n.node_guid).size() == 18);
      FUZZ_CHECK(c::GuidString(n.port_guid).size() == 18);
      FUZZ_CHECK(n.vendor_id < (1u << 24));
      return type != "unknown" && n.num_ports > 0;
    }
    case 1: {  // PortInfo
      const c::PortStates s = c::DecodePortStates(mad);
      FUZZ_CHECK(s.state <= 15 && s.phys_state <= 15);  // 4-bit fields
      return c::PortStateName(s.state) != "UNKNOWN" && c::PortStateName(s.state) != "NOP" &&
             c::PhysStateName(s.phys_state) != "<unknown>";
    }
    case 2:
    case 3: {  // PortCounters / PortCountersExtended: every field the scan reads from this reply
      const c::MadQuery query =
          kind == 2 ? c::MadQuery::kPortCounters : c::MadQuery::kPortCountersExtended;
      const std::vector<c::ScanField> fields = c::PortScanFields(cap_mask, use_extended);
      FUZZ_CHECK(fields.size() >= 2);  // state and phys_state at least
      for (const c::ScanField& f : fields) {
        FUZZ_CHECK(!f.counter.empty());
        if (f.query != query) continue;
        const uint64_t v = c::DecodeScanField(mad, f);
        // A counter's value fits the width it is declared with (the width comes from
        // PmaCounterSpec, the bits from libibmad's field table: they must agree).
        if (f.width > 0 && f.width < 64) FUZZ_CHECK(v < (uint64_t{1} << f.width));
        if (f.query == c::MadQuery::kPortCountersExtended) {
          FUZZ_CHECK(c::UsesExtendedCounters(cap_mask, use_extended));
        }
      }
      return true;
    }
    case 4: {  // NodeDescription
      const std::string d = c::DecodeNodeDescription(mad);
      FUZZ_CHECK(d.size() <= 64);
      FUZZ_CHECK(d.empty() || d.back() != ' ');
      for (char ch : d) FUZZ_CHECK(ch >= 0x20 && ch < 0x7f);
      return true;
    }
    default: {  // ClassPortInfo
      const uint16_t mask = c::DecodeClassPortInfoCapMask(mad);
      // What the scan reads follows the capabilities the PMA states.
      const std::vector<c::ScanField> fields = c::PortScanFields(mask, true);
      bool xmit_wait = false;
      for (const c::ScanField& f : fields) xmit_wait |= f.counter == "port_xmit_wait";
      FUZZ_CHECK(xmit_wait == ((mask & c::kPmaCapXmitWait) != 0));
      return true;
    }
  }
}

}  // namespace ringside::fuzz
