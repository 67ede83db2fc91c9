// EthtoolIoctl: the SIOCETHTOOL string-set/stats protocol against a fake kernel the input scripts,
// then the name classifiers on whatever names it read.
#include <linux/if.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "collectors/ethtool/ethtool_ioctl.h"
#include "collectors/ethtool/ethtool_names.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_entries.h"
#include "tests/fuzz/fuzz_input.h"

namespace ringside::fuzz {
namespace {

namespace c = ringside::collectors;
namespace abi = ringside::collectors::ethtool_abi;

constexpr int kMaxCalls = 64;
// The most entries the fake kernel's tables hold (mlx5 with many channels has a few thousand); a
// GSSET_INFO answer may still claim up to 2^32-1 (action 4).
constexpr uint32_t kMaxEntries = 4096;

// One fake kernel per input. Each call takes an action byte: 0-4 answer (4: GSSET_INFO with a
// 32-bit set size), 5 EOPNOTSUPP, 6 ENODEV, 7 EINTR. Replies never write past what the caller asked for,
// as the guard page behind the real buffers enforces.
class FakeKernel {
 public:
  explicit FakeKernel(FuzzInput& in) : in_(in) {}

  int Ioctl(unsigned long request, struct ifreq* ifr) {
    FUZZ_CHECK(request == abi::kSiocEthtool);
    FUZZ_CHECK(std::strcmp(ifr->ifr_name, "eth0") == 0);
    if (++calls_ > kMaxCalls) return Fail(ENODEV);
    const uint8_t action = in_.U8() % 8;
    if (action == 5) return Fail(EOPNOTSUPP);
    if (action == 6) return Fail(ENODEV);
    if (action == 7) return Fail(EINTR);
    auto* buf = reinterpret_cast<unsigned char*>(ifr->ifr_data);
    uint32_t cmd = 0;
    std::memcpy(&cmd, buf, sizeof(cmd));
    switch (cmd) {
      case abi::kGetSsetInfo: {
        abi::SsetInfo info;
        std::memcpy(&info, buf, sizeof(info));
        FUZZ_CHECK(info.sset_mask == (uint64_t{1} << abi::kStringSetStats));
        if ((in_.U8() & 1) == 0) info.sset_mask = 0;
        info.data[0] = action == 4 ? in_.U32() : in_.U16() % kMaxEntries;
        std::memcpy(buf, &info, sizeof(info));
        return 0;
      }
      case abi::kGetStrings:
        return Table(buf, abi::kStringLen);
      case abi::kGetStats:
        return Table(buf, sizeof(uint64_t));
      case abi::kGetPauseParam: {
        abi::PauseParam p{cmd, in_.U8(), in_.U8(), in_.U8()};
        std::memcpy(buf, &p, sizeof(p));
        return 0;
      }
      default:
        FUZZ_CHECK(false && "unknown ethtool command");
        return Fail(EINVAL);
    }
  }

 private:
  int Fail(int err) {
    errno = err;
    return -1;
  }

  // GSTRINGS and GSTATS: a u32 count at offset 8 (strings) or 4 (stats) says how many entries the
  // caller's buffer holds; the kernel has `n` now. A new kernel answers a stale count with 0
  // entries; an old one writes its n and faults past the caller's buffer.
  int Table(unsigned char* buf, size_t entry) {
    const bool strings = entry == abi::kStringLen;
    const size_t count_at = strings ? 8 : 4;
    const size_t data_at = strings ? abi::kGStringsDataOffset : abi::kStatsDataOffset;
    uint32_t asked = 0;
    std::memcpy(&asked, buf + count_at, sizeof(asked));
    const uint8_t how = in_.U8();
    const uint32_t n = (how & 1) ? std::min(asked, kMaxEntries) : in_.U16() % kMaxEntries;
    if ((how & 2) && n != asked) {
      const uint32_t zero = 0;
      std::memcpy(buf + count_at, &zero, sizeof(zero));
      return 0;
    }
    std::memcpy(buf + count_at, &n, sizeof(n));
    const uint32_t written = std::min(n, asked);
    for (uint32_t i = 0; i < written; ++i) in_.Fill(buf + data_at + i * entry, entry);
    if (n > asked) return Fail(EFAULT);
    return 0;
  }

  FuzzInput& in_;
  int calls_ = 0;
};

}  // namespace

bool EthtoolIoctl(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  FakeKernel kernel(in);
  std::unique_ptr<c::EthtoolIoctl> io = c::NewEthtoolIoctl(
      c::EthtoolIoctlOptions{}, [&kernel](int, unsigned long request, struct ifreq* ifr) {
        return kernel.Ioctl(request, ifr);
      });
  absl::StatusOr<std::vector<std::string>> names = io->GetStringSet("eth0");
  if (!names.ok()) {
    FUZZ_CHECK(names.status().code() != absl::StatusCode::kUnknown);
    return false;
  }
  for (const std::string& name : *names) {
    FUZZ_CHECK(name.size() <= abi::kStringLen);
    FUZZ_CHECK(name.find('\0') == std::string::npos);
    const int8_t prio = c::EthtoolPriority(name);
    FUZZ_CHECK(prio >= -1 && prio <= 15);
    const std::string tmpl = c::EthtoolNameTemplate(name);
    if (prio < 0) FUZZ_CHECK(tmpl == name);
    (void)c::EthtoolUnit(name);
    (void)c::EthtoolKind(name);
    (void)c::EthtoolCounterIs32Bit(name);
    const c::SeriesDef def = c::EthtoolSeriesDef("eth0", name);
    FUZZ_CHECK(def.device == "eth0");
  }
  const c::EthtoolCapabilities caps = c::EthtoolCapabilitiesFromNames(*names);
  const std::set<std::string> unique(names->begin(), names->end());
  const c::InfoRecord rec =
      c::EthtoolCapabilitiesRecord("eth0", c::EthtoolSupport::kSupported, unique.size(), caps,
                                   "unknown", names->size() - unique.size());
  FUZZ_CHECK(rec.labels.count("stats") == 1);

  bool got_values = false;
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<c::EthtoolStats> stats = io->GetStats("eth0", names->size());
    if (!stats.ok()) break;
    if (stats->outcome == c::EthtoolStats::Outcome::kOk) {
      FUZZ_CHECK(stats->values.size() == names->size());
      got_values = true;
    } else {
      FUZZ_CHECK(stats->values.empty());
    }
  }
  absl::StatusOr<c::EthtoolPauseParam> pause = io->GetPauseParam("eth0");
  if (pause.ok()) FUZZ_CHECK(!c::FormatPauseConfig(*pause).empty());
  return !names->empty() && got_values;
}

}  // namespace ringside::fuzz
