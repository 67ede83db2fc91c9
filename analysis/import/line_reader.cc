#include "analysis/import/line_reader.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ringside::analysis {

absl::StatusOr<bool> LineReader::Next(std::string* line) {
  for (;;) {
    size_t nl = buf_.find('\n', pos_);
    if (nl != std::string::npos || (eof_ && pos_ < buf_.size())) {
      size_t end = nl == std::string::npos ? buf_.size() : nl;
      if (end - pos_ > max_line_) break;
      line->assign(buf_, pos_, end - pos_);
      if (!line->empty() && line->back() == '\r') line->pop_back();
      pos_ = nl == std::string::npos ? buf_.size() : nl + 1;
      ++line_number_;
      return true;
    }
    if (eof_) return false;
    if (buf_.size() - pos_ > max_line_) break;
    buf_.erase(0, pos_);
    pos_ = 0;
    size_t old = buf_.size();
    buf_.resize(old + (1 << 16));
    absl::StatusOr<size_t> n = src_->Read(buf_.data() + old, 1 << 16);
    if (!n.ok()) {
      buf_.resize(old);
      return absl::Status(n.status().code(),
                          absl::StrCat("after line ", line_number_, ": ", n.status().message()));
    }
    buf_.resize(old + *n);
    if (*n == 0) eof_ = true;
  }
  return absl::DataLossError(absl::StrCat("line ", line_number_ + 1, " is longer than ", max_line_,
                                          " bytes (not a text file?)"));
}

}  // namespace ringside::analysis
