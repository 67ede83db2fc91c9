// The definition sets kept for definitions by reference (daemon/aggregator/ingest/
// definition_catalog.h), and the digest both sides compute (daemon/common/series_set_digest.h).
#include "daemon/aggregator/ingest/definition_catalog.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/aggregator/ingest/series_defs_view.h"
#include "daemon/common/series_set_digest.h"
#include "gtest/gtest.h"
#include "ringside/v1/ingest.pb.h"

namespace ringside::daemon {
namespace {

v1::SeriesDefs Defs(int n, const std::string& device = "mlx5_0") {
  v1::SeriesDefs defs;
  for (int i = 1; i <= n; ++i) {
    v1::SeriesDef* d = defs.add_defs();
    d->set_id(static_cast<uint32_t>(i));
    d->set_source("infiniband");
    d->set_device(device);
    d->set_port("1");
    d->set_counter(absl::StrCat("a_counter_whose_name_is_longer_than_sso_", i));
    d->set_priority(i % 9 - 1);
    d->set_kind(i % 3 == 0 ? v1::SERIES_KIND_GAUGE : v1::SERIES_KIND_COUNTER);
    d->set_width(i % 3 == 0 ? 0 : 64);
    d->set_unit("packets");
    d->set_saturates(i % 2 == 0);
    d->set_term_width(i % 5 == 0 ? 32 : 0);
  }
  return defs;
}

// What the agent computes, from its ringside.v1 definitions.
std::string AgentDigest(const v1::SeriesDefs& defs) {
  SeriesSetDigest d;
  for (const v1::SeriesDef& def : defs.defs()) d.Add(def);
  return d.Finish();
}

TEST(SeriesSetDigestTest, AgentAndAggregatorAgree) {
  const v1::SeriesDefs defs = Defs(50);
  SeriesDefsView view;
  SeriesDefsFromProto(defs, &view);
  ASSERT_TRUE(view.malformed.ok());
  const std::string agent = AgentDigest(defs);
  EXPECT_EQ(agent.size(), kSeriesSetDigestBytes);
  EXPECT_EQ(DefinitionCatalog::DigestOf(view.defs), agent);
  // The aggregator keeps one term width (32); the agent's other widths name the same set.
  v1::SeriesDefs odd = defs;
  odd.mutable_defs(0)->set_term_width(16);
  EXPECT_EQ(AgentDigest(odd), agent);
  // Any field that the aggregator keeps changes the digest.
  for (int field = 0; field < 10; ++field) {
    v1::SeriesDefs other = defs;
    v1::SeriesDef* d = other.mutable_defs(7);
    switch (field) {
      case 0: d->set_id(1000); break;
      case 1: d->set_source("netdev"); break;
      case 2: d->set_device("mlx5_1"); break;
      case 3: d->set_port("2"); break;
      case 4: d->set_counter("x"); break;
      case 5: d->set_priority(3); break;
      case 6: d->set_kind(v1::SERIES_KIND_STATE); break;
      case 7: d->set_width(32); break;
      case 8: d->set_unit("bytes"); break;
      case 9: d->set_saturates(!d->saturates()); break;
    }
    EXPECT_NE(AgentDigest(other), agent) << "field " << field;
  }
  // Names are length-prefixed: moving a byte from one name to the next is another set.
  v1::SeriesDefs shifted = defs;
  shifted.mutable_defs(0)->set_device("mlx5_");
  shifted.mutable_defs(0)->set_port("01");
  EXPECT_NE(AgentDigest(shifted), agent);
  // The digest starts again after Finish.
  SeriesSetDigest reused;
  reused.Add(defs.defs(0));
  (void)reused.Finish();
  for (const v1::SeriesDef& def : defs.defs()) reused.Add(def);
  EXPECT_EQ(reused.Finish(), agent);
}

TEST(DefinitionCatalogTest, KeepsOnlySetsWhoseDigestChecksOut) {
  DefinitionCatalog catalog;
  const v1::SeriesDefs defs = Defs(1500);
  SeriesDefsView view;
  SeriesDefsFromProto(defs, &view);
  const std::string digest = AgentDigest(defs);
  EXPECT_EQ(catalog.Find(digest), nullptr);

  // Another set's digest, a short one, ids that do not ascend: refused.
  EXPECT_EQ(catalog.Learn(AgentDigest(Defs(1499)), view.defs),
            DefinitionCatalog::LearnResult::kMismatch);
  EXPECT_EQ(catalog.Learn(digest.substr(0, 16), view.defs),
            DefinitionCatalog::LearnResult::kMismatch);
  std::vector<analysis::SeriesDefinitionRef> swapped = view.defs;
  std::swap(swapped[3], swapped[4]);
  EXPECT_EQ(catalog.Learn(DefinitionCatalog::DigestOf(swapped), swapped),
            DefinitionCatalog::LearnResult::kMismatch);
  EXPECT_EQ(catalog.sets(), 0u);

  EXPECT_EQ(catalog.Learn(digest, view.defs), DefinitionCatalog::LearnResult::kAdded);
  EXPECT_EQ(catalog.Learn(digest, view.defs), DefinitionCatalog::LearnResult::kHeld);
  EXPECT_EQ(catalog.sets(), 1u);
  EXPECT_GT(catalog.bytes(), 1500u * sizeof(analysis::SeriesDefinition));

  // The set owns its names: the message it came from may go.
  view = SeriesDefsView();
  std::shared_ptr<const DefinitionSet> set = catalog.Find(digest);
  ASSERT_NE(set, nullptr);
  ASSERT_EQ(set->refs.size(), 1500u);
  for (int i = 0; i < 1500; ++i) {
    const v1::SeriesDef& want = defs.defs(i);
    const analysis::SeriesDefinitionRef& got = set->refs[i];
    EXPECT_EQ(got.id, want.id());
    EXPECT_EQ(got.counter, want.counter());
    EXPECT_EQ(got.device, want.device());
    EXPECT_EQ(got.priority, want.priority());
    EXPECT_EQ(static_cast<int>(got.kind), static_cast<int>(want.kind()));
    EXPECT_EQ(got.saturates, want.saturates());
    EXPECT_EQ(got.term_width, want.term_width());
  }
}

TEST(DefinitionCatalogTest, TheLeastRecentlyUsedSetGoesFirst) {
  DefinitionCatalogOptions o;
  o.max_sets = 3;
  DefinitionCatalog catalog(o);
  std::vector<std::string> digests;
  std::vector<SeriesDefsView> views(5);
  std::vector<v1::SeriesDefs> sets;
  for (int i = 0; i < 5; ++i) sets.push_back(Defs(20, absl::StrCat("mlx5_", i)));
  for (int i = 0; i < 5; ++i) {
    SeriesDefsFromProto(sets[i], &views[i]);
    digests.push_back(AgentDigest(sets[i]));
  }
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(catalog.Learn(digests[i], views[i].defs), DefinitionCatalog::LearnResult::kAdded);
  }
  ASSERT_NE(catalog.Find(digests[0]), nullptr);  // 0 used: 1 is now the oldest
  ASSERT_EQ(catalog.Learn(digests[3], views[3].defs), DefinitionCatalog::LearnResult::kAdded);
  EXPECT_EQ(catalog.sets(), 3u);
  EXPECT_NE(catalog.Find(digests[0]), nullptr);
  EXPECT_EQ(catalog.Find(digests[1]), nullptr);
  EXPECT_NE(catalog.Find(digests[2]), nullptr);
  EXPECT_NE(catalog.Find(digests[3]), nullptr);

  // A byte budget holds too: room for about two sets of 20.
  DefinitionCatalogOptions small;
  small.max_bytes = 2 * 20 * (sizeof(analysis::SeriesDefinition) +
                              sizeof(analysis::SeriesDefinitionRef) + 48) + 2 * 1024;
  DefinitionCatalog budget(small);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(budget.Learn(digests[i], views[i].defs), DefinitionCatalog::LearnResult::kAdded);
    EXPECT_LE(budget.bytes(), small.max_bytes);
  }
  EXPECT_EQ(budget.sets(), 2u);
  EXPECT_NE(budget.Find(digests[4]), nullptr);

  // Off: nothing kept.
  DefinitionCatalogOptions off;
  off.max_sets = 0;
  DefinitionCatalog none(off);
  EXPECT_EQ(none.Learn(digests[0], views[0].defs), DefinitionCatalog::LearnResult::kNotKept);
  EXPECT_EQ(none.Find(digests[0]), nullptr);
}

// The in-place reader takes complete_digest, as protobuf does (the last one counts).
TEST(DefinitionCatalogTest, TheWireReaderTakesTheCompleteDigest) {
  v1::AgentMessage m;
  *m.mutable_series_defs() = Defs(10);
  const std::string digest = AgentDigest(m.series_defs());
  m.mutable_series_defs()->set_complete_digest(digest);
  SeriesDefsView view;
  const std::string bytes = m.SerializeAsString();  // the views point into it
  ASSERT_TRUE(ParseSeriesDefsMessage(bytes, &view));
  EXPECT_EQ(view.complete_digest, digest);
  EXPECT_EQ(view.defs.size(), 10u);
  EXPECT_EQ(DefinitionCatalog::DigestOf(view.defs), digest);
  // Two of them in one SeriesDefs (two serialized messages concatenated merge): the last counts,
  // for the reader as for protobuf.
  v1::SeriesDefs second;
  second.set_complete_digest(std::string(32, 'x'));
  const std::string inner = m.series_defs().SerializeAsString() + second.SerializeAsString();
  std::string raw = "\x5a";  // field 11 (series_defs), length-delimited
  for (size_t n = inner.size(); ; n >>= 7) {
    if (n < 0x80) {
      raw.push_back(static_cast<char>(n));
      break;
    }
    raw.push_back(static_cast<char>((n & 0x7f) | 0x80));
  }
  raw += inner;
  v1::AgentMessage check;
  ASSERT_TRUE(check.ParseFromString(raw));
  EXPECT_EQ(check.series_defs().complete_digest(), std::string(32, 'x'));
  ASSERT_TRUE(ParseSeriesDefsMessage(raw, &view));
  EXPECT_EQ(view.complete_digest, std::string(32, 'x'));
  EXPECT_EQ(view.defs.size(), 10u);
}

}  // namespace
}  // namespace ringside::daemon
