#include "analysis/import/gzip_source.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <string>

#include "absl/strings/match.h"
#include "analysis/import/byte_source.h"
#include "analysis/import/line_reader.h"

namespace ringside::analysis {
namespace {

std::string Gzip(const std::string& data) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&zs, data.size()) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

// Hands out at most `chunk` bytes per read, to split the gzip magic and lines across reads.
class ChunkySource : public ByteSource {
 public:
  ChunkySource(std::string data, size_t chunk) : data_(std::move(data)), chunk_(chunk) {}
  absl::StatusOr<size_t> Read(char* buf, size_t n) override {
    size_t k = std::min({n, chunk_, data_.size() - pos_});
    std::copy(data_.begin() + static_cast<long>(pos_), data_.begin() + static_cast<long>(pos_ + k),
              buf);
    pos_ += k;
    return k;
  }

 private:
  std::string data_;
  size_t chunk_;
  size_t pos_ = 0;
};

std::string Text(int lines) {
  std::string s;
  for (int i = 0; i < lines; ++i) s += "line " + std::to_string(i) + " of some text\n";
  return s;
}

TEST(GzipSourceTest, InflatesGzipAndPassesPlainThrough) {
  const std::string text = Text(5000);
  for (size_t chunk : {size_t{1}, size_t{7}, size_t{1} << 20}) {
    ChunkySource gz(Gzip(text), chunk);
    MaybeGzipSource a(&gz);
    absl::StatusOr<std::string> got = ReadAll(a, 1 << 24);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, text);
    EXPECT_TRUE(a.is_gzip());

    ChunkySource plain(text, chunk);
    MaybeGzipSource b(&plain);
    got = ReadAll(b, 1 << 24);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, text);
    EXPECT_FALSE(b.is_gzip());
  }
}

TEST(GzipSourceTest, ConcatenatedMembersAreOneStream) {
  ChunkySource gz(Gzip("first\n") + Gzip("second\n"), 3);
  MaybeGzipSource src(&gz);
  absl::StatusOr<std::string> got = ReadAll(src, 1 << 20);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "first\nsecond\n");
}

TEST(GzipSourceTest, EmptyAndTinyInputs) {
  for (std::string in : {std::string(""), std::string("a"), std::string("\x1f")}) {
    StringSource s(in);
    MaybeGzipSource src(&s);
    absl::StatusOr<std::string> got = ReadAll(src, 1 << 20);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, in);
  }
  StringSource magic_only(std::string("\x1f\x8b", 2));
  MaybeGzipSource src(&magic_only);
  absl::StatusOr<std::string> got = ReadAll(src, 1 << 20);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
}

TEST(GzipSourceTest, TrailingGarbageIsCorrupt) {
  StringSource s(Gzip("ok\n") + "not gzip");
  MaybeGzipSource src(&s);
  absl::StatusOr<std::string> got = ReadAll(src, 1 << 20);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(got.status().message(), "corrupt gzip")) << got.status();
}

TEST(LineReaderTest, SplitsLinesAcrossReadsAndCountsThem) {
  ChunkySource src("a\r\nbb\n\nccc", 2);
  LineReader r(&src);
  std::string line;
  std::vector<std::string> lines;
  for (;;) {
    absl::StatusOr<bool> more = r.Next(&line);
    ASSERT_TRUE(more.ok()) << more.status();
    if (!*more) break;
    lines.push_back(line);
  }
  EXPECT_EQ(lines, (std::vector<std::string>{"a", "bb", "", "ccc"}));
  EXPECT_EQ(r.line_number(), 4);
}

TEST(LineReaderTest, OverlongLineIsAnError) {
  StringSource src(std::string(100, 'x') + "\n");
  LineReader r(&src, 50);
  std::string line;
  absl::StatusOr<bool> more = r.Next(&line);
  ASSERT_FALSE(more.ok());
  EXPECT_EQ(more.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(more.status().message(), "line 1 is longer than 50 bytes"));
}

}  // namespace
}  // namespace ringside::analysis
