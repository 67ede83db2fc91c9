// The SIOCETHTOOL protocol against a fake kernel behind the ioctl seam. The fake reads and writes
// the structs at the offsets the kernel uses (reference/ib-roce-counters.md §5.1), and can act as
// a kernel from before the count-race fix (writes the current count whatever was asked) or after
// it (answers a stale count with 0 entries).
#include "collectors/ethtool/ethtool_ioctl.h"

#include <gtest/gtest.h>
#include <net/if.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace ringside::collectors {
namespace {

namespace abi = ethtool_abi;

class FakeKernel {
 public:
  struct Dev {
    std::vector<std::string> names;
    std::vector<uint64_t> values;
    bool has_stats = true;
    bool has_pause = false;
    abi::PauseParam pause{};
  };
  std::map<std::string, Dev> devs;
  bool fixed = true;  // the kernel has commit 7b07be1ff1cb
  // Runs after every GSSET_INFO: lets a test change a device's set between two calls.
  std::function<void(const std::string& ifname)> after_sset_info;
  std::vector<uint32_t> commands;
  int faults = 0;  // copies to the caller that hit memory it cannot write (EFAULT)

  IoctlFn Fn() {
    return [this](int, unsigned long request, struct ifreq* ifr) { return Handle(request, ifr); };
  }

 private:
  int Fail(int err) {
    errno = err;
    return -1;
  }

  // The kernel's copy_to_user: through a read() into the caller's buffer, so an address the process
  // cannot write fails as it does in the kernel (EFAULT, or a short copy) instead of being
  // overwritten.
  bool CopyToUser(void* dst, const void* src, size_t n) {
    if (n == 0) return true;
    const int fd = ::memfd_create("copy_to_user", MFD_CLOEXEC);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::write(fd, src, n), static_cast<ssize_t>(n));
    const ssize_t got = ::pread(fd, dst, n, 0);
    ::close(fd);
    if (got == static_cast<ssize_t>(n)) return true;
    ++faults;
    return false;
  }

  int Handle(unsigned long request, struct ifreq* ifr) {
    EXPECT_EQ(request, abi::kSiocEthtool);
    char* data = ifr->ifr_data;
    uint32_t cmd;
    std::memcpy(&cmd, data, sizeof(cmd));
    commands.push_back(cmd);
    auto it = devs.find(ifr->ifr_name);
    if (it == devs.end()) return Fail(ENODEV);
    Dev& dev = it->second;
    switch (cmd) {
      case abi::kGetSsetInfo: {
        abi::SsetInfo info;
        std::memcpy(&info, data, sizeof(info));
        EXPECT_EQ(info.sset_mask, uint64_t{1} << 1);
        if (dev.has_stats) {
          info.data[0] = static_cast<uint32_t>(dev.names.size());
        } else {
          info.sset_mask = 0;  // the kernel clears the bits of sets the driver lacks
        }
        std::memcpy(data, &info, sizeof(info));
        if (after_sset_info) after_sset_info(ifr->ifr_name);
        return 0;
      }
      case abi::kGetStrings: {
        if (!dev.has_stats) return Fail(EOPNOTSUPP);
        abi::GStringsHeader h;
        std::memcpy(&h, data, sizeof(h));
        EXPECT_EQ(h.string_set, abi::kStringSetStats);
        const uint32_t current = static_cast<uint32_t>(dev.names.size());
        if (fixed && h.len != 0 && h.len != current) {
          h.len = 0;
          std::memcpy(data, &h, sizeof(h));
          return 0;
        }
        h.len = current;
        std::memcpy(data, &h, sizeof(h));
        std::vector<char> slots(size_t{current} * abi::kStringLen, 0);
        for (uint32_t i = 0; i < current; ++i) {
          std::memcpy(slots.data() + i * abi::kStringLen, dev.names[i].data(),
                      std::min(dev.names[i].size(), abi::kStringLen));
        }
        if (!CopyToUser(data + abi::kGStringsDataOffset, slots.data(), slots.size())) {
          return Fail(EFAULT);
        }
        return 0;
      }
      case abi::kGetStats: {
        if (!dev.has_stats) return Fail(EOPNOTSUPP);
        abi::StatsHeader h;
        std::memcpy(&h, data, sizeof(h));
        const uint32_t current = static_cast<uint32_t>(dev.values.size());
        if (fixed && h.n_stats != 0 && h.n_stats != current) {
          h.n_stats = 0;
          std::memcpy(data, &h, sizeof(h));
          return 0;
        }
        h.n_stats = current;
        std::memcpy(data, &h, sizeof(h));
        if (!CopyToUser(data + abi::kStatsDataOffset, dev.values.data(),
                        current * sizeof(uint64_t))) {
          return Fail(EFAULT);  // the header is already written, as in ethtool_get_stats()
        }
        return 0;
      }
      case abi::kGetPauseParam: {
        if (!dev.has_pause) return Fail(EOPNOTSUPP);
        dev.pause.cmd = cmd;
        std::memcpy(data, &dev.pause, sizeof(dev.pause));
        return 0;
      }
      default:
        return Fail(EOPNOTSUPP);
    }
  }
};

std::vector<std::string> Names(int n, const std::string& prefix = "stat_") {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(prefix + std::to_string(i));
  return out;
}
std::vector<uint64_t> Values(int n, uint64_t base) {
  std::vector<uint64_t> out;
  for (int i = 0; i < n; ++i) out.push_back(base + i);
  return out;
}

TEST(EthtoolIoctlTest, NamesValuesAndPause) {
  FakeKernel k;
  // A name filling its whole 32-byte slot has no NUL.
  const std::string full(32, 'x');
  k.devs["eth0"] = {{"rx_prio3_pause", full, "tx_bytes"}, {7, 8, UINT64_MAX}};
  k.devs["eth0"].has_pause = true;
  k.devs["eth0"].pause = {0, 0, 1, 1};
  auto io = NewEthtoolIoctl({}, k.Fn());

  absl::StatusOr<std::vector<std::string>> names = io->GetStringSet("eth0");
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_EQ(*names, (std::vector<std::string>{"rx_prio3_pause", full, "tx_bytes"}));
  EXPECT_EQ(k.commands, (std::vector<uint32_t>{abi::kGetSsetInfo, abi::kGetStrings}));

  absl::StatusOr<EthtoolStats> stats = io->GetStats("eth0", 3);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->outcome, EthtoolStats::Outcome::kOk);
  EXPECT_EQ(stats->values, (std::vector<uint64_t>{7, 8, UINT64_MAX}));

  absl::StatusOr<EthtoolPauseParam> pause = io->GetPauseParam("eth0");
  ASSERT_TRUE(pause.ok());
  EXPECT_FALSE(pause->autoneg);
  EXPECT_TRUE(pause->rx_pause);
  EXPECT_TRUE(pause->tx_pause);
}

TEST(EthtoolIoctlTest, NoStatisticsAndErrors) {
  FakeKernel k;
  k.devs["lo"] = {};
  k.devs["lo"].has_stats = false;
  auto io = NewEthtoolIoctl({}, k.Fn());
  absl::StatusOr<std::vector<std::string>> names = io->GetStringSet("lo");
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_TRUE(names->empty());
  EXPECT_TRUE(absl::IsUnimplemented(io->GetPauseParam("lo").status()));
  EXPECT_TRUE(absl::IsNotFound(io->GetStringSet("nosuch0").status()));
  EXPECT_TRUE(absl::IsNotFound(io->GetStats("nosuch0", 3).status()));
  const size_t calls = k.commands.size();
  EXPECT_TRUE(absl::IsInvalidArgument(io->GetStringSet("a-name-longer-than-15").status()));
  EXPECT_EQ(k.commands.size(), calls);  // refused before the system call
}

// The set grows between GSSET_INFO and GSTRINGS: both kernels make GetStringSet ask again, and
// the names returned are the new set's.
TEST(EthtoolIoctlTest, StringSetChangingWhileReadIsReadAgain) {
  for (bool fixed : {true, false}) {
    SCOPED_TRACE(fixed ? "fixed kernel" : "old kernel");
    FakeKernel k;
    k.fixed = fixed;
    k.devs["eth0"] = {Names(10), Values(10, 0)};
    int changes = 1;
    k.after_sset_info = [&](const std::string& ifname) {
      if (changes-- > 0) k.devs[ifname].names = Names(15);  // PFC enabled on a priority
    };
    auto io = NewEthtoolIoctl({}, k.Fn());
    absl::StatusOr<std::vector<std::string>> names = io->GetStringSet("eth0");
    ASSERT_TRUE(names.ok()) << names.status();
    EXPECT_EQ(*names, Names(15));
    EXPECT_EQ(k.commands, (std::vector<uint32_t>{abi::kGetSsetInfo, abi::kGetStrings,
                                                 abi::kGetSsetInfo, abi::kGetStrings}));
  }
}

TEST(EthtoolIoctlTest, StringSetThatNeverSettlesIsUnavailable) {
  FakeKernel k;
  k.devs["eth0"] = {Names(10), Values(10, 0)};
  int n = 10;
  k.after_sset_info = [&](const std::string& ifname) { k.devs[ifname].names = Names(++n); };
  auto io = NewEthtoolIoctl({.string_set_attempts = 3}, k.Fn());
  EXPECT_TRUE(absl::IsUnavailable(io->GetStringSet("eth0").status()));
  EXPECT_EQ(k.commands.size(), 6u);  // bounded
}

TEST(EthtoolIoctlTest, StatsWithStaleCountAreStringSetChanged) {
  for (bool fixed : {true, false}) {
    SCOPED_TRACE(fixed ? "fixed kernel" : "old kernel");
    FakeKernel k;
    k.fixed = fixed;
    k.devs["eth0"] = {Names(10), Values(10, 100)};
    auto io = NewEthtoolIoctl({}, k.Fn());

    // The caller holds 10 names; the driver now has 15: seen by the count check, no GSTATS.
    k.devs["eth0"].names = Names(15);
    k.devs["eth0"].values = Values(15, 100);
    k.commands.clear();
    absl::StatusOr<EthtoolStats> s = io->GetStats("eth0", 10);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->outcome, EthtoolStats::Outcome::kStringSetChanged);
    EXPECT_TRUE(s->values.empty());
    EXPECT_EQ(k.commands, (std::vector<uint32_t>{abi::kGetSsetInfo}));

    // The set grows after the count check, before GSTATS: the fixed kernel answers 0 entries, the
    // old one writes all 20 (into the headroom); both are "changed".
    k.devs["eth0"].names = Names(10);
    k.devs["eth0"].values = Values(10, 100);
    k.after_sset_info = [&](const std::string& ifname) {
      k.devs[ifname].names = Names(20);
      k.devs[ifname].values = Values(20, 100);
    };
    s = io->GetStats("eth0", 10);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->outcome, EthtoolStats::Outcome::kStringSetChanged);
    EXPECT_TRUE(s->values.empty());
  }
}

// An old kernel writes every value the driver has now, whatever count was asked. A set that grew
// far past the buffer between GSSET_INFO and GSTATS (mlx5: `ethtool -L combined 8` → 64 adds
// thousands of ring stats) must hit the guard page (EFAULT), not the heap; a second GSSET_INFO
// then says the set changed.
TEST(EthtoolIoctlTest, AnOldKernelsLargerAnswerFaultsInsteadOfOverrunning) {
  constexpr size_t kGrown = 2'000'000;  // 16 MB of values, far past any heap slack
  FakeKernel k;
  k.fixed = false;
  k.devs["eth0"] = {Names(4), Values(4, 1)};
  auto io = NewEthtoolIoctl({.string_set_attempts = 3}, k.Fn());
  int grow = 1;
  k.after_sset_info = [&](const std::string& ifname) {
    if (grow-- != 1) return;
    k.devs[ifname].names.resize(kGrown, "rx_ring_stat");
    k.devs[ifname].values.resize(kGrown, 7);
  };
  k.commands.clear();
  absl::StatusOr<EthtoolStats> s = io->GetStats("eth0", 4);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->outcome, EthtoolStats::Outcome::kStringSetChanged);
  EXPECT_TRUE(s->values.empty());
  EXPECT_EQ(k.faults, 1);
  EXPECT_EQ(k.commands,
            (std::vector<uint32_t>{abi::kGetSsetInfo, abi::kGetStats, abi::kGetSsetInfo}));

  // Sized again, the whole set reads.
  absl::StatusOr<EthtoolStats> again = io->GetStats("eth0", kGrown);
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(again->outcome, EthtoolStats::Outcome::kOk);
  ASSERT_EQ(again->values.size(), kGrown);
  EXPECT_EQ(again->values.back(), 7u);
  EXPECT_EQ(k.faults, 1);
}

// The same for the names: GSTRINGS faults on the guard page, and the next attempt sizes the set
// with a second GSSET_INFO and reads it whole.
TEST(EthtoolIoctlTest, StringSetThatGrowsPastTheBufferIsSizedAgain) {
  FakeKernel k;
  k.fixed = false;
  k.devs["eth0"] = {Names(4), Values(4, 1)};
  int grow = 1;
  k.after_sset_info = [&](const std::string& ifname) {
    if (grow-- != 1) return;
    k.devs[ifname].names = Names(5000);
    k.devs[ifname].values = Values(5000, 1);
  };
  auto io = NewEthtoolIoctl({.string_set_attempts = 3}, k.Fn());
  absl::StatusOr<std::vector<std::string>> names = io->GetStringSet("eth0");
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_EQ(*names, Names(5000));
  EXPECT_EQ(k.faults, 1);
  EXPECT_EQ(k.commands, (std::vector<uint32_t>{abi::kGetSsetInfo, abi::kGetStrings,
                                               abi::kGetSsetInfo, abi::kGetStrings}));
}

TEST(EthtoolIoctlTest, OpensARealSocket) {
  // Without the seam: the real ioctl on an interface that does not exist.
  auto io = NewEthtoolIoctl();
  absl::StatusOr<std::vector<std::string>> names = io->GetStringSet("rsnosuch0");
  EXPECT_TRUE(absl::IsNotFound(names.status())) << names.status();
}

}  // namespace
}  // namespace ringside::collectors
