// The fuzz targets' corpora replayed in every build (gcc included): each checked-in seed of
// tests/fuzz/corpus/<target>/ through the target's entry — seeds named "ok-*" must be accepted and
// "bad-*" refused — then a fixed-seed set of mutations of the seeds (bit flips, byte writes,
// inserts, deletes, truncations, splices), which must not crash (the entries abort on a broken
// parser promise). Inputs a fuzzer found are kept under "crash-*" or "regress-*" and replayed too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_entries.h"

namespace ringside::fuzz {
namespace {

namespace fs = std::filesystem;

using Entry = bool (*)(const uint8_t*, size_t);

struct Seed {
  std::string name;
  std::string bytes;
};

std::vector<Seed> LoadCorpus(const std::string& target) {
  std::vector<Seed> seeds;
  const fs::path dir = fs::path(RINGSIDE_SOURCE_DIR) / "tests/fuzz/corpus" / target;
  if (!fs::is_directory(dir)) return seeds;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    seeds.push_back({e.path().filename().string(),
                     std::string(std::istreambuf_iterator<char>(in), {})});
  }
  std::sort(seeds.begin(), seeds.end(), [](const Seed& a, const Seed& b) { return a.name < b.name; });
  return seeds;
}

bool Run(Entry entry, const std::string& bytes) {
  return entry(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

std::string Mutate(std::string s, const std::vector<Seed>& seeds, std::mt19937_64& rng) {
  auto pick = [&rng](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  const int steps = 1 + static_cast<int>(rng() % 4);
  for (int k = 0; k < steps; ++k) {
    switch (rng() % 7) {
      case 0:  // flip a bit
        if (!s.empty()) s[pick(s.size())] ^= static_cast<char>(1 << (rng() % 8));
        break;
      case 1:  // write an interesting byte
        if (!s.empty()) {
          static constexpr char kBytes[] = {0, 1, '\n', ' ', '-', '9', 0x7f, '\xff', '\x80', ':'};
          s[pick(s.size())] = kBytes[rng() % sizeof(kBytes)];
        }
        break;
      case 2:  // insert random bytes
        s.insert(pick(s.size() + 1), std::string(1 + rng() % 8, static_cast<char>(rng())));
        break;
      case 3:  // delete a run
        if (!s.empty()) {
          const size_t at = pick(s.size());
          s.erase(at, 1 + pick(std::min<size_t>(16, s.size() - at)));
        }
        break;
      case 4:  // truncate
        s.resize(pick(s.size() + 1));
        break;
      case 5: {  // splice the tail of another seed
        const std::string& other = seeds[pick(seeds.size())].bytes;
        s = s.substr(0, pick(s.size() + 1)) + other.substr(pick(other.size() + 1));
        break;
      }
      case 6:  // write a little-endian 32-bit extreme
        if (s.size() >= 4) {
          static constexpr uint32_t kWords[] = {0, 1, 0x7fffffff, 0x80000000, 0xffffffff, 256, 257};
          const uint32_t w = kWords[rng() % std::size(kWords)];
          const size_t at = pick(s.size() - 3);
          for (int i = 0; i < 4; ++i) s[at + i] = static_cast<char>(w >> (8 * i));
        }
        break;
    }
  }
  return s;
}

void Replay(const std::string& target, Entry entry, int mutations) {
  const std::vector<Seed> seeds = LoadCorpus(target);
  ASSERT_FALSE(seeds.empty()) << "no seeds in tests/fuzz/corpus/" << target;
  int ok = 0, bad = 0;
  for (const Seed& seed : seeds) {
    const bool accepted = Run(entry, seed.bytes);
    if (seed.name.rfind("ok-", 0) == 0) {
      EXPECT_TRUE(accepted) << target << "/" << seed.name << " was refused";
      ++ok;
    } else if (seed.name.rfind("bad-", 0) == 0) {
      EXPECT_FALSE(accepted) << target << "/" << seed.name << " was accepted";
      ++bad;
    }
  }
  EXPECT_GT(ok, 0) << target << " has no ok-* seed";
  EXPECT_GT(bad, 0) << target << " has no bad-* seed";
  std::mt19937_64 rng(0x5eed0000u + target.size());
  int accepted = 0;
  for (int i = 0; i < mutations; ++i) {
    const std::string input = Mutate(seeds[i % seeds.size()].bytes, seeds, rng);
    accepted += Run(entry, input) ? 1 : 0;
  }
  // Not every mutation breaks an input, nor does every one survive: the mutations reach both sides.
  ::testing::Test::RecordProperty("mutations_accepted", accepted);
  EXPECT_LT(accepted, mutations) << target << ": every mutation was accepted";
}

TEST(FuzzCorpusTest, IngestSession) { Replay("ingest_session", IngestSession, 10000); }
TEST(FuzzCorpusTest, CollectiveStream) { Replay("collective_stream", CollectiveStream, 10000); }
TEST(FuzzCorpusTest, SysfsText) { Replay("sysfs_text", SysfsText, 10000); }
TEST(FuzzCorpusTest, TopologyText) { Replay("topology_text", TopologyText, 10000); }
TEST(FuzzCorpusTest, EthtoolText) { Replay("ethtool_text", EthtoolText, 10000); }
TEST(FuzzCorpusTest, EthtoolIoctl) { Replay("ethtool_ioctl", EthtoolIoctl, 10000); }
TEST(FuzzCorpusTest, NetlinkLink) { Replay("netlink_link", NetlinkLink, 10000); }
TEST(FuzzCorpusTest, MadFields) { Replay("mad_fields", MadFields, 10000); }
TEST(FuzzCorpusTest, JournalSegment) { Replay("journal_segment", JournalSegment, 10000); }
TEST(FuzzCorpusTest, TraceImport) { Replay("trace_import", TraceImport, 10000); }
TEST(FuzzCorpusTest, DetectionConfig) { Replay("detection_config", DetectionConfig, 10000); }
TEST(FuzzCorpusTest, ScenarioYaml) { Replay("scenario_yaml", ScenarioYaml, 10000); }
TEST(FuzzCorpusTest, SeriesDefsWire) { Replay("series_defs_wire", SeriesDefsWire, 10000); }
TEST(FuzzCorpusTest, SampleBatchWire) { Replay("sample_batch_wire", SampleBatchWire, 10000); }

}  // namespace
}  // namespace ringside::fuzz
