#include "sim/host_state.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ringside::sim {
namespace {

absl::Status WriteAtomically(const std::string& path, const std::string& text) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out) return absl::InternalError("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError("cannot rename " + tmp);
  }
  return absl::OkStatus();
}

}  // namespace

std::string RankCgroup(int rank) {
  return absl::StrCat("/ringside-sim.slice/rank-", rank, ".scope");
}

HostState::HostState(std::string dir, int first_rank, int ranks)
    : dir_(std::move(dir)), proc_(dir_ + "/proc"), sys_(dir_ + "/sys"), first_rank_(first_rank) {
  for (int r = first_rank; r < first_rank + ranks; ++r) ranks_[r];
}

std::string HostState::CgroupFile(int rank) const {
  return absl::StrCat(dir_, "/rank-", rank, ".proc-self-cgroup");
}

void HostState::SetThrottled(int rank, double share, absl::Duration t) {
  auto it = ranks_.find(rank);
  if (it == ranks_.end() || it->second.share == share) return;
  (void)Write(t);  // counters up to now at the old share
  it->second.share = share;
}

absl::Status HostState::Write(absl::Duration t) {
  const double dt = absl::ToDoubleSeconds(t - last_);
  last_ = t;
  if (!written_) {
    for (const char* r : {"cpu", "memory", "io"}) {
      absl::Status s = WriteAtomically(absl::StrCat(proc_, "/pressure/", r),
                                       "some avg10=0.00 avg60=0.00 avg300=0.00 total=1000\n"
                                       "full avg10=0.00 avg60=0.00 avg300=0.00 total=100\n");
      if (!s.ok()) return s;
    }
    for (const auto& [rank, st] : ranks_) {
      absl::Status s =
          WriteAtomically(CgroupFile(rank), absl::StrCat("0::", RankCgroup(rank), "\n"));
      if (!s.ok()) return s;
    }
  }
  for (auto& [rank, st] : ranks_) {
    // Only a throttled rank's counters move (a quiet cgroup's cpu.stat is written once).
    if (written_ && st.share == 0) continue;
    if (dt > 0) {
      st.usage_us += dt * 1e6 * (1 - st.share);
      st.periods += dt * 10;  // a 100 ms quota period
      if (st.share > 0) {
        st.throttled += dt * 10;
        st.throttled_us += dt * 1e6 * st.share;
      }
    }
    absl::Status s = WriteAtomically(
        absl::StrCat(sys_, "/fs/cgroup", RankCgroup(rank), "/cpu.stat"),
        absl::StrFormat("usage_usec %.0f\nuser_usec %.0f\nsystem_usec 0\nnr_periods %.0f\n"
                        "nr_throttled %.0f\nthrottled_usec %.0f\nnr_bursts 0\nburst_usec 0\n",
                        st.usage_us, st.usage_us, st.periods, st.throttled, st.throttled_us));
    if (!s.ok()) return s;
  }
  written_ = true;
  return absl::OkStatus();
}

}  // namespace ringside::sim
