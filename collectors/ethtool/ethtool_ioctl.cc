#include "collectors/ethtool/ethtool_ioctl.h"

#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "collectors/common/file_system.h"
#include "collectors/ethtool/guarded_buffer.h"

namespace ringside::collectors {
namespace {

namespace abi = ethtool_abi;

// The layouts must match the kernel's byte for byte (LP64).
static_assert(offsetof(abi::SsetInfo, cmd) == 0);
static_assert(offsetof(abi::SsetInfo, reserved) == 4);
static_assert(offsetof(abi::SsetInfo, sset_mask) == 8);
static_assert(offsetof(abi::SsetInfo, data) == 16);
static_assert(offsetof(abi::GStringsHeader, len) == 8);
static_assert(sizeof(abi::GStringsHeader) == abi::kGStringsDataOffset);
static_assert(offsetof(abi::StatsHeader, n_stats) == 4);
static_assert(sizeof(abi::StatsHeader) == abi::kStatsDataOffset);
static_assert(sizeof(abi::PauseParam) == 16);

class RealEthtoolIoctl final : public EthtoolIoctl {
 public:
  RealEthtoolIoctl(EthtoolIoctlOptions options, IoctlFn ioctl_fn)
      : options_(options), ioctl_(std::move(ioctl_fn)) {
    if (!ioctl_) {
      ioctl_ = [](int fd, unsigned long request, struct ifreq* ifr) {
        return ::ioctl(fd, request, ifr);
      };
    }
    // Any datagram socket carries SIOCETHTOOL; AF_UNIX is there even when IPv4 is not.
    for (int family : {AF_INET, AF_UNIX}) {
      fd_ = ::socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      if (fd_ >= 0) break;
    }
    if (fd_ < 0) open_status_ = ErrnoStatus(errno, "socket", "for SIOCETHTOOL");
  }
  ~RealEthtoolIoctl() override {
    if (fd_ >= 0) ::close(fd_);
  }

  absl::StatusOr<std::vector<std::string>> GetStringSet(const std::string& ifname) override {
    for (int attempt = 0; attempt < std::max(1, options_.string_set_attempts); ++attempt) {
      absl::StatusOr<uint32_t> count = StatsCount(ifname);
      if (!count.ok()) return count.status();
      if (*count == 0) return std::vector<std::string>{};

      // Exactly `count` slots before a guard page: an old kernel whose set grew since GSSET_INFO
      // faults (EFAULT) instead of writing past them.
      unsigned char* buf = strings_buf_.Get(abi::kGStringsDataOffset + *count * abi::kStringLen);
      if (buf == nullptr) return absl::ResourceExhaustedError("mmap for ETHTOOL_GSTRINGS");
      abi::GStringsHeader header{abi::kGetStrings, abi::kStringSetStats, *count};
      std::memcpy(buf, &header, sizeof(header));
      if (absl::Status s = Call(ifname, buf, "GSTRINGS"); !s.ok()) {
        if (errno_ == EFAULT) continue;  // grew past the buffer: size it again
        return s;
      }
      std::memcpy(&header, buf, sizeof(header));
      if (header.len != *count) continue;  // the set changed after GSSET_INFO: ask again

      std::vector<std::string> names;
      names.reserve(header.len);
      for (size_t i = 0; i < header.len; ++i) {
        const char* slot =
            reinterpret_cast<const char*>(buf + abi::kGStringsDataOffset + i * abi::kStringLen);
        names.emplace_back(slot, ::strnlen(slot, abi::kStringLen));  // a full slot has no NUL
      }
      return names;
    }
    return absl::UnavailableError(
        absl::StrCat("SIOCETHTOOL ", ifname, ": the statistics set kept changing while read"));
  }

  absl::StatusOr<EthtoolStats> GetStats(const std::string& ifname, size_t expected_count) override {
    EthtoolStats out;
    // A cheap count check first narrows the window in which the set can change under GSTATS.
    absl::StatusOr<uint32_t> count = StatsCount(ifname);
    if (!count.ok()) return count.status();
    if (*count != expected_count) {
      out.outcome = EthtoolStats::Outcome::kStringSetChanged;
      return out;
    }
    if (expected_count == 0) return out;

    for (int attempt = 0; attempt < 2; ++attempt) {
      // The header, then exactly `expected_count` values, then a guard page (guarded_buffer.h).
      const size_t bytes = abi::kStatsDataOffset + expected_count * sizeof(uint64_t);
      unsigned char* buf = stats_buf_.Get(bytes);
      if (buf == nullptr) return absl::ResourceExhaustedError("mmap for ETHTOOL_GSTATS");
      abi::StatsHeader header{abi::kGetStats, static_cast<uint32_t>(expected_count)};
      std::memcpy(buf, &header, sizeof(header));
      if (absl::Status s = Call(ifname, buf, "GSTATS"); !s.ok()) {
        if (errno_ != EFAULT) return s;
        // An old kernel wrote more values than we hold names for and hit the guard page: the set
        // grew after GSSET_INFO. Ask its size again; a different one means re-read the names.
        count = StatsCount(ifname);
        if (!count.ok()) return count.status();
        if (*count != expected_count) {
          out.outcome = EthtoolStats::Outcome::kStringSetChanged;
          return out;
        }
        if (attempt == 0) continue;  // grew and shrank back: once more
        return s;
      }
      std::memcpy(&header, buf, sizeof(header));
      if (header.n_stats == 0 || header.n_stats != expected_count) {
        out.outcome = EthtoolStats::Outcome::kStringSetChanged;
        return out;
      }
      out.values.resize(expected_count);
      std::memcpy(out.values.data(), buf + abi::kStatsDataOffset,
                  expected_count * sizeof(uint64_t));
      return out;
    }
    out.outcome = EthtoolStats::Outcome::kStringSetChanged;
    return out;
  }

  absl::StatusOr<EthtoolPauseParam> GetPauseParam(const std::string& ifname) override {
    abi::PauseParam p{abi::kGetPauseParam, 0, 0, 0};
    if (absl::Status s = Call(ifname, &p, "GPAUSEPARAM"); !s.ok()) return s;
    return EthtoolPauseParam{p.autoneg != 0, p.rx_pause != 0, p.tx_pause != 0};
  }

 private:
  // The number of ETH_SS_STATS strings; 0 when the driver has no such set.
  absl::StatusOr<uint32_t> StatsCount(const std::string& ifname) {
    abi::SsetInfo info{};
    info.cmd = abi::kGetSsetInfo;
    info.sset_mask = uint64_t{1} << abi::kStringSetStats;
    if (absl::Status s = Call(ifname, &info, "GSSET_INFO"); !s.ok()) return s;
    if ((info.sset_mask & (uint64_t{1} << abi::kStringSetStats)) == 0) return 0u;
    if (info.data[0] > abi::kMaxStats) {
      return absl::DataLossError(absl::StrCat("SIOCETHTOOL GSSET_INFO ", ifname, ": ", info.data[0],
                                              " stats claimed, more than ", abi::kMaxStats));
    }
    return info.data[0];
  }

  absl::Status Call(const std::string& ifname, void* data, absl::string_view what) {
    if (!open_status_.ok()) return open_status_;
    if (ifname.empty() || ifname.size() >= IFNAMSIZ) {
      return absl::InvalidArgumentError(absl::StrCat("bad interface name \"", ifname, "\""));
    }
    struct ifreq ifr;
    std::memset(&ifr, 0, sizeof(ifr));
    std::memcpy(ifr.ifr_name, ifname.data(), ifname.size());
    ifr.ifr_data = static_cast<char*>(data);
    errno_ = 0;
    for (;;) {
      if (ioctl_(fd_, abi::kSiocEthtool, &ifr) >= 0) return absl::OkStatus();
      if (errno != EINTR) break;
    }
    errno_ = errno;
    return ErrnoStatus(errno_, absl::StrCat("SIOCETHTOOL ", what), ifname);
  }

  EthtoolIoctlOptions options_;
  IoctlFn ioctl_;
  int fd_ = -1;
  absl::Status open_status_;
  int errno_ = 0;              // of the last failed Call
  GuardedBuffer stats_buf_;    // reused every cycle
  GuardedBuffer strings_buf_;
};

}  // namespace

std::unique_ptr<EthtoolIoctl> NewEthtoolIoctl(EthtoolIoctlOptions options, IoctlFn ioctl_fn) {
  return std::make_unique<RealEthtoolIoctl>(options, std::move(ioctl_fn));
}

}  // namespace ringside::collectors
