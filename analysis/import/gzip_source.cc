#include "analysis/import/gzip_source.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ringside::analysis {

struct MaybeGzipSource::ZState {
  z_stream zs{};
  bool initialized = false;
  ~ZState() {
    if (initialized) inflateEnd(&zs);
  }
};

MaybeGzipSource::MaybeGzipSource(ByteSource* inner) : inner_(inner) {}
MaybeGzipSource::~MaybeGzipSource() = default;

absl::Status MaybeGzipSource::Fill() {
  if (in_pos_ < in_.size() || inner_eof_) return absl::OkStatus();
  in_.resize(1 << 16);
  in_pos_ = 0;
  absl::StatusOr<size_t> n = inner_->Read(in_.data(), in_.size());
  if (!n.ok()) {
    in_.clear();
    return n.status();
  }
  in_.resize(*n);
  if (*n == 0) inner_eof_ = true;
  return absl::OkStatus();
}

absl::StatusOr<size_t> MaybeGzipSource::Read(char* buf, size_t n) {
  if (n == 0) return 0;
  if (mode_ == Mode::kUnknown) {
    // Look at the first two bytes (they may arrive in separate reads).
    while (!inner_eof_ && in_.size() - in_pos_ < 2) {
      std::string have = in_.substr(in_pos_);
      in_.clear();
      in_pos_ = 0;
      if (absl::Status s = Fill(); !s.ok()) return s;
      in_.insert(0, have);
    }
    bool gz = in_.size() - in_pos_ >= 2 && static_cast<unsigned char>(in_[in_pos_]) == 0x1f &&
              static_cast<unsigned char>(in_[in_pos_ + 1]) == 0x8b;
    mode_ = gz ? Mode::kGzip : Mode::kPlain;
    gzip_ = gz;
    if (gz) {
      z_ = std::make_unique<ZState>();
      if (inflateInit2(&z_->zs, 16 + MAX_WBITS) != Z_OK) {
        return absl::InternalError("zlib: inflateInit2 failed");
      }
      z_->initialized = true;
    }
  }
  if (mode_ == Mode::kDone) return 0;
  if (mode_ == Mode::kPlain) {
    if (absl::Status s = Fill(); !s.ok()) return s;
    size_t k = std::min(n, in_.size() - in_pos_);
    std::memcpy(buf, in_.data() + in_pos_, k);
    in_pos_ += k;
    return k;
  }
  return ReadGzip(buf, n);
}

absl::StatusOr<size_t> MaybeGzipSource::ReadGzip(char* buf, size_t n) {
  z_stream& zs = z_->zs;
  for (;;) {
    if (absl::Status s = Fill(); !s.ok()) return s;
    size_t avail = in_.size() - in_pos_;
    if (member_ended_) {
      if (avail == 0 && inner_eof_) {
        mode_ = Mode::kDone;
        return 0;
      }
      if (avail == 0) continue;
      // Another member follows (`cat a.gz b.gz`).
      inflateReset(&zs);
      member_ended_ = false;
    }
    if (avail == 0 && inner_eof_) {
      return absl::DataLossError(absl::StrCat("gzip stream truncated: input ends after ", consumed_,
                                              " compressed bytes, before the end of the stream"));
    }
    zs.next_in = reinterpret_cast<Bytef*>(in_.data() + in_pos_);
    zs.avail_in = static_cast<uInt>(avail);
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    int rc = inflate(&zs, Z_NO_FLUSH);
    size_t used = avail - zs.avail_in;
    in_pos_ += used;
    consumed_ += used;
    size_t produced = std::min<size_t>(n, 1u << 30) - zs.avail_out;
    if (rc == Z_STREAM_END) {
      member_ended_ = true;
    } else if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT || rc == Z_MEM_ERROR ||
               rc == Z_STREAM_ERROR) {
      return absl::DataLossError(absl::StrCat("corrupt gzip data near compressed byte ", consumed_,
                                              ": ", zs.msg ? zs.msg : "zlib error ", rc));
    }
    // Z_OK or Z_BUF_ERROR (needs more input): loop unless there is output to hand back.
    if (produced > 0) return produced;
  }
}

}  // namespace ringside::analysis
