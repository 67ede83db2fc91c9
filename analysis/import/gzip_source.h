// A ByteSource that inflates gzip input (RFC 1952, concatenated members as `gzip` writes them) and
// passes anything else through unchanged, so one code path reads trace.csv and trace.csv.gz.
#ifndef RINGSIDE_ANALYSIS_IMPORT_GZIP_SOURCE_H_
#define RINGSIDE_ANALYSIS_IMPORT_GZIP_SOURCE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "analysis/import/byte_source.h"

namespace ringside::analysis {

class MaybeGzipSource : public ByteSource {
 public:
  // `inner` must outlive this source.
  explicit MaybeGzipSource(ByteSource* inner);
  ~MaybeGzipSource() override;
  MaybeGzipSource(const MaybeGzipSource&) = delete;
  MaybeGzipSource& operator=(const MaybeGzipSource&) = delete;

  // DataLoss for a truncated or corrupt gzip stream (with the compressed offset); the inner
  // source's own errors pass through.
  absl::StatusOr<size_t> Read(char* buf, size_t n) override;

  // Known after the first Read: whether the input was gzip.
  bool is_gzip() const { return gzip_; }

 private:
  enum class Mode { kUnknown, kPlain, kGzip, kDone };
  absl::Status Fill();  // refills in_ from the inner source when it is empty
  absl::StatusOr<size_t> ReadGzip(char* buf, size_t n);

  ByteSource* inner_;
  Mode mode_ = Mode::kUnknown;
  std::string in_;  // compressed (or plain) bytes not consumed yet: in_[in_pos_..]
  size_t in_pos_ = 0;
  bool inner_eof_ = false;
  uint64_t consumed_ = 0;  // compressed bytes handed to zlib so far, for messages
  struct ZState;
  std::unique_ptr<ZState> z_;
  bool member_ended_ = false;
  bool gzip_ = false;
};

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_IMPORT_GZIP_SOURCE_H_
