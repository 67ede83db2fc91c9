// Splits a ByteSource into lines ("\n" or "\r\n"), counting them from 1 for error messages.
#ifndef RINGSIDE_ANALYSIS_IMPORT_LINE_READER_H_
#define RINGSIDE_ANALYSIS_IMPORT_LINE_READER_H_

#include <cstdint>
#include <string>

#include "analysis/import/byte_source.h"

namespace ringside::analysis {

class LineReader {
 public:
  // `src` must outlive the reader. A line longer than `max_line_bytes` is an error (DataLoss), so
  // a binary or corrupt input cannot make the reader hold it all.
  explicit LineReader(ByteSource* src, size_t max_line_bytes = 1 << 20)
      : src_(src), max_line_(max_line_bytes) {}

  // The next line, without its terminator, in `line`; false at the end of the input. The last
  // line may lack a terminator.
  absl::StatusOr<bool> Next(std::string* line);
  // The number of the line that Next returned last (1-based).
  int64_t line_number() const { return line_number_; }

 private:
  ByteSource* src_;
  size_t max_line_;
  std::string buf_;
  size_t pos_ = 0;
  bool eof_ = false;
  int64_t line_number_ = 0;
};

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_IMPORT_LINE_READER_H_
