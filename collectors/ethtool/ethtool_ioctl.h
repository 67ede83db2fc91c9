// The SIOCETHTOOL protocol for driver statistics (what `ethtool -S` shows), behind a small
// interface so the collector can be given a fake.
//
// Protocol (include/uapi/linux/ethtool.h, net/ethtool/ioctl.c): ETHTOOL_GSSET_INFO gives the
// number of stats, ETHTOOL_GSTRINGS their names (32-byte NUL-padded slots), ETHTOOL_GSTATS their
// values as u64 in the same order. The driver may change its set between two calls (mlx5 adds
// per-priority PFC stats when PFC is enabled on a priority), so:
// - GetStats is given the count of the names the caller holds and passes it to the kernel;
// - kernels since "ethtool: Avoid overflowing userspace buffer on stats query" (6.19, 6.12-stable)
//   answer a count that is no longer current with 0 entries; older ones ignore it and write the
//   current count. The buffers hold exactly the expected count and end at a PROT_NONE page
//   (guarded_buffer.h), so such a write fails with EFAULT instead of running over memory; then a
//   second GSSET_INFO sizes the set again (GSTRINGS retries with it);
// - a returned count of 0 or one that differs from the expected count is reported as
//   kStringSetChanged: the caller re-reads the names and skips that sample.
//
// The socket is opened once and belongs to the network namespace the process (thread) was in at
// that moment: every call answers for the interfaces of that namespace.
#ifndef RINGSIDE_COLLECTORS_ETHTOOL_ETHTOOL_IOCTL_H_
#define RINGSIDE_COLLECTORS_ETHTOOL_ETHTOOL_IOCTL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

struct ifreq;

namespace ringside::collectors {

// One ETHTOOL_GSTATS answer.
struct EthtoolStats {
  enum class Outcome : uint8_t {
    kOk,                // values holds expected_count values
    kStringSetChanged,  // the driver's set is not the one the caller holds: re-read the names
  };
  Outcome outcome = Outcome::kOk;
  std::vector<uint64_t> values;
};

// ETHTOOL_GPAUSEPARAM: the pause configuration (not counters).
struct EthtoolPauseParam {
  bool autoneg = false;
  bool rx_pause = false;
  bool tx_pause = false;
};

class EthtoolIoctl {
 public:
  virtual ~EthtoolIoctl() = default;

  // The names of the interface's driver statistics (string set ETH_SS_STATS), in the driver's
  // order. Empty when the driver has none (loopback, bridges). Errors: Unimplemented
  // (EOPNOTSUPP), NotFound (no such interface), Unavailable (the set kept changing while read),
  // DataLoss (a count above ethtool_abi::kMaxStats).
  virtual absl::StatusOr<std::vector<std::string>> GetStringSet(const std::string& ifname) = 0;

  // The values of the interface's stats, if the driver still has `expected_count` of them.
  virtual absl::StatusOr<EthtoolStats> GetStats(const std::string& ifname,
                                                size_t expected_count) = 0;

  // Pause configuration; Unimplemented for a device without pause (veth, loopback).
  virtual absl::StatusOr<EthtoolPauseParam> GetPauseParam(const std::string& ifname) = 0;
};

// The system call, as a seam for tests of the protocol: (fd, SIOCETHTOOL, ifreq) → ioctl's return
// value, with errno set on failure.
using IoctlFn = std::function<int(int fd, unsigned long request, struct ifreq* ifr)>;

struct EthtoolIoctlOptions {
  // GSSET_INFO/GSTRINGS attempts before GetStringSet gives up on a set that keeps changing.
  int string_set_attempts = 3;
};

// The real protocol over a datagram socket (AF_INET, or AF_UNIX where IPv4 is absent) opened now.
// If no socket can be opened, every call returns that error. `ioctl_fn` replaces ::ioctl in tests.
std::unique_ptr<EthtoolIoctl> NewEthtoolIoctl(EthtoolIoctlOptions options = {},
                                              IoctlFn ioctl_fn = nullptr);

// Command numbers and layouts (LP64 offsets), as the kernel's uapi defines them; public so a fake
// kernel in a test speaks the same protocol.
namespace ethtool_abi {
inline constexpr unsigned long kSiocEthtool = 0x8946;
inline constexpr uint32_t kGetPauseParam = 0x12;
inline constexpr uint32_t kGetStrings = 0x1b;
inline constexpr uint32_t kGetStats = 0x1d;
inline constexpr uint32_t kGetSsetInfo = 0x37;
inline constexpr uint32_t kStringSetStats = 1;  // ETH_SS_STATS
inline constexpr size_t kStringLen = 32;        // ETH_GSTRING_LEN
// Far more stats than any driver has (mlx5 with hundreds of channels has tens of thousands): a
// larger GSSET_INFO count is refused (DataLoss) rather than sizing and zeroing buffers for it
// (2^32-1 names would be 128 GiB; this bound keeps them under 128 MiB).
inline constexpr uint32_t kMaxStats = 1u << 22;

// struct ethtool_sset_info: cmd @0, reserved @4, sset_mask @8, data[] (u32) @16.
struct SsetInfo {
  uint32_t cmd;
  uint32_t reserved;
  uint64_t sset_mask;
  uint32_t data[1];  // one count per bit set in sset_mask; we set one bit
};
// struct ethtool_gstrings: cmd @0, string_set @4, len @8, data[] @12 (len × 32 bytes).
struct GStringsHeader {
  uint32_t cmd;
  uint32_t string_set;
  uint32_t len;
};
inline constexpr size_t kGStringsDataOffset = 12;
// struct ethtool_stats: cmd @0, n_stats @4, data[] (u64) @8.
struct StatsHeader {
  uint32_t cmd;
  uint32_t n_stats;
};
inline constexpr size_t kStatsDataOffset = 8;
// struct ethtool_pauseparam: cmd, autoneg, rx_pause, tx_pause (u32 each), 16 bytes.
struct PauseParam {
  uint32_t cmd;
  uint32_t autoneg;
  uint32_t rx_pause;
  uint32_t tx_pause;
};
}  // namespace ethtool_abi

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_ETHTOOL_ETHTOOL_IOCTL_H_
