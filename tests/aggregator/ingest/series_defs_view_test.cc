// The SeriesDefs wire reader against protobuf: what it reads equals what protobuf parses; what it
// declines (non-canonical or broken bytes) is left to protobuf, never read differently.
#include "daemon/aggregator/ingest/series_defs_view.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>

#include "tests/aggregator/ingest/ingest_test_util.h"

namespace ringside::daemon {
namespace {

v1::SeriesDef Def(uint32_t id, const std::string& counter, v1::SeriesKind kind, uint32_t width) {
  v1::SeriesDef d = testing::CounterDef(id, counter, width);
  d.set_kind(kind);
  return d;
}

v1::AgentMessage Message() {
  v1::AgentMessage m;
  v1::SeriesDefs* defs = m.mutable_series_defs();
  *defs->add_defs() = Def(0, "symbol_error", v1::SERIES_KIND_COUNTER, 16);
  v1::SeriesDef d = Def(1, "port_rcv_remote_physical_errors", v1::SERIES_KIND_COUNTER, 64);
  d.set_saturates(true);
  d.set_term_width(32);
  *defs->add_defs() = d;
  d = Def(7, "tx_prio3_pause", v1::SERIES_KIND_COUNTER, 64);
  d.set_source("ethtool");
  d.set_device("eth0");
  d.set_port("");
  d.set_priority(3);
  d.set_unit("packets");
  *defs->add_defs() = d;
  *defs->add_defs() = Def(9, "state", v1::SERIES_KIND_STATE, 0);
  *defs->add_defs() = Def(12,
                          "temperature_\xc2\xb0"
                          "C",
                          v1::SERIES_KIND_GAUGE, 0);
  return m;
}

// The views of one definition, compared field by field.
void ExpectSame(const SeriesDefsView& got, const SeriesDefsView& want) {
  EXPECT_EQ(got.malformed, want.malformed);
  EXPECT_EQ(got.defs_received, want.defs_received);
  EXPECT_EQ(got.info_received, want.info_received);
  ASSERT_EQ(got.defs.size(), want.defs.size());
  for (size_t i = 0; i < got.defs.size(); ++i) {
    const analysis::SeriesDefinitionRef& a = got.defs[i];
    const analysis::SeriesDefinitionRef& b = want.defs[i];
    SCOPED_TRACE(i);
    EXPECT_EQ(a.id, b.id);
    EXPECT_EQ(a.source, b.source);
    EXPECT_EQ(a.device, b.device);
    EXPECT_EQ(a.port, b.port);
    EXPECT_EQ(a.counter, b.counter);
    EXPECT_EQ(a.unit, b.unit);
    EXPECT_EQ(a.priority, b.priority);
    EXPECT_EQ(a.kind, b.kind);
    EXPECT_EQ(a.width, b.width);
    EXPECT_EQ(a.saturates, b.saturates);
    EXPECT_EQ(a.term_width, b.term_width);
  }
  ASSERT_EQ(got.info != nullptr, want.info != nullptr);
  if (got.info != nullptr) {
    EXPECT_EQ(got.info->info_size(), want.info->info_size());
    for (int i = 0; i < got.info->info_size(); ++i) {
      EXPECT_EQ(got.info->info(i).SerializeAsString(), want.info->info(i).SerializeAsString());
    }
  }
}

TEST(SeriesDefsViewTest, ReadsWhatProtobufParses) {
  const std::string bytes = Message().SerializeAsString();
  SeriesDefsView wire;
  ASSERT_TRUE(ParseSeriesDefsMessage(bytes, &wire));
  EXPECT_TRUE(MayBeSeriesDefsMessage(bytes));
  v1::AgentMessage parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  SeriesDefsView proto;
  SeriesDefsFromProto(parsed.series_defs(), &proto);
  ExpectSame(wire, proto);
  ASSERT_EQ(wire.defs.size(), 5u);
  EXPECT_EQ(wire.defs[1].counter, "port_rcv_remote_physical_errors");
  EXPECT_TRUE(wire.defs[1].saturates);
  EXPECT_EQ(wire.defs[1].term_width, 32);
  EXPECT_EQ(wire.defs[2].priority, 3);
  EXPECT_EQ(wire.defs[2].port, "");
  EXPECT_EQ(wire.defs[3].kind, analysis::SeriesKind::kState);
  EXPECT_EQ(wire.info, nullptr);  // no has_info: observers are not told
  // The names are views into the received bytes, not copies.
  EXPECT_GE(wire.defs[0].counter.data(), bytes.data());
  EXPECT_LT(wire.defs[0].counter.data(), bytes.data() + bytes.size());
}

TEST(SeriesDefsViewTest, InfoRecordsWithHasInfoAreParsedForObservers) {
  v1::AgentMessage m = Message();
  v1::InfoRecord* r = m.mutable_series_defs()->add_info();
  r->set_source("netdev");
  r->set_device("eth0");
  (*r->mutable_labels())["rdma_device"] = "mlx5_0";
  (*r->mutable_labels())["rdma_port"] = "1";
  m.mutable_series_defs()->set_has_info(true);
  const std::string bytes = m.SerializeAsString();
  SeriesDefsView wire;
  ASSERT_TRUE(ParseSeriesDefsMessage(bytes, &wire));
  ASSERT_NE(wire.info, nullptr);
  EXPECT_TRUE(wire.info->has_info());
  ASSERT_EQ(wire.info->info_size(), 1);
  EXPECT_EQ(wire.info->info(0).labels().at("rdma_device"), "mlx5_0");
  EXPECT_EQ(wire.info_received, 1u);
  EXPECT_EQ(wire.defs.size(), 5u);
}

TEST(SeriesDefsViewTest, MalformedDefinitionEndsThePrefixWithProtobufPathsError) {
  v1::AgentMessage m = Message();
  m.mutable_series_defs()->mutable_defs(2)->set_kind(static_cast<v1::SeriesKind>(7));
  m.mutable_series_defs()->mutable_defs(3)->set_width(65);
  const std::string bytes = m.SerializeAsString();
  SeriesDefsView wire;
  ASSERT_TRUE(ParseSeriesDefsMessage(bytes, &wire));
  EXPECT_EQ(wire.defs.size(), 2u);
  EXPECT_EQ(wire.defs_received, 5u);
  EXPECT_EQ(wire.malformed, absl::InvalidArgumentError("series 7: unknown kind 7"));
  SeriesDefsView proto;
  SeriesDefsFromProto(m.series_defs(), &proto);
  ExpectSame(wire, proto);
}

TEST(SeriesDefsViewTest, DeclinesWhatIsNotACanonicalUnsequencedSeriesDefs) {
  SeriesDefsView wire;
  v1::AgentMessage m = Message();
  m.set_seq(5);  // a sequenced SeriesDefs is a protocol error: protobuf's path reports it
  EXPECT_FALSE(ParseSeriesDefsMessage(m.SerializeAsString(), &wire));
  v1::AgentMessage hello;
  hello.mutable_hello()->set_node("n1");
  EXPECT_FALSE(ParseSeriesDefsMessage(hello.SerializeAsString(), &wire));
  EXPECT_FALSE(MayBeSeriesDefsMessage(hello.SerializeAsString()));
  v1::AgentMessage samples;
  samples.set_seq(1);
  samples.mutable_samples()->add_ids(1);
  EXPECT_FALSE(ParseSeriesDefsMessage(samples.SerializeAsString(), &wire));
  EXPECT_FALSE(ParseSeriesDefsMessage("", &wire));
  // An unknown field in a definition (a newer agent): protobuf keeps it, the reader declines.
  std::string def;
  Def(3, "x", v1::SERIES_KIND_COUNTER, 8).SerializeToString(&def);
  def += std::string("\xa0\x01\x01", 3);  // field 20, varint 1
  std::string defs_body = std::string("\x0a", 1) + static_cast<char>(def.size()) + def;
  std::string msg = std::string("\x5a", 1) + static_cast<char>(defs_body.size()) + defs_body;
  v1::AgentMessage reparsed;
  ASSERT_TRUE(reparsed.ParseFromString(msg));
  EXPECT_FALSE(ParseSeriesDefsMessage(msg, &wire));
  // Invalid UTF-8 in a name: protobuf refuses the message; so does the reader.
  v1::AgentMessage bad = Message();
  bad.mutable_series_defs()->mutable_defs(0)->set_counter("bad\xff");
  const std::string bad_bytes = bad.SerializePartialAsString();
  EXPECT_FALSE(reparsed.ParseFromString(bad_bytes));
  EXPECT_FALSE(ParseSeriesDefsMessage(bad_bytes, &wire));
}

// Random corruptions (bounded): whatever the reader accepts, protobuf parses to the same thing.
TEST(SeriesDefsViewTest, CorruptedBytesAreReadAsProtobufReadsThemOrDeclined) {
  const std::string good = Message().SerializeAsString();
  std::mt19937 rng(26);
  int accepted = 0;
  for (int round = 0; round < 5000; ++round) {
    std::string bytes = good;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % bytes.size();
      switch (rng() % 3) {
        case 0:
          bytes[at] = static_cast<char>(rng());
          break;
        case 1:
          bytes.erase(at, 1);
          break;
        default:
          bytes.resize(at);
          break;
      }
      if (bytes.empty()) break;
    }
    SeriesDefsView wire;
    if (!ParseSeriesDefsMessage(bytes, &wire)) continue;
    ++accepted;
    v1::AgentMessage parsed;
    ASSERT_TRUE(parsed.ParseFromString(bytes)) << "round " << round;
    ASSERT_TRUE(parsed.has_series_defs()) << "round " << round;
    EXPECT_EQ(parsed.seq(), 0u);
    SeriesDefsView proto;
    SeriesDefsFromProto(parsed.series_defs(), &proto);
    SCOPED_TRACE(round);
    ExpectSame(wire, proto);
  }
  EXPECT_GT(accepted, 0);  // some corruptions stay well-formed (a changed value or letter)
}

}  // namespace
}  // namespace ringside::daemon
