// The importers read their input through ByteSource, so parsing stays free of I/O: the CLI hands
// them a file (daemon/ctl/file_source.h), tests hand them strings or fault-injecting sources.
#ifndef RINGSIDE_ANALYSIS_IMPORT_BYTE_SOURCE_H_
#define RINGSIDE_ANALYSIS_IMPORT_BYTE_SOURCE_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringside::analysis {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Reads up to `n` bytes into `buf`; returns how many, 0 at the end of the input.
  virtual absl::StatusOr<size_t> Read(char* buf, size_t n) = 0;
};

// Bytes held in memory (owned).
class StringSource : public ByteSource {
 public:
  explicit StringSource(std::string data) : data_(std::move(data)) {}
  absl::StatusOr<size_t> Read(char* buf, size_t n) override;

 private:
  std::string data_;
  size_t pos_ = 0;
};

// Everything `src` has, or ResourceExhausted past `max_bytes`.
absl::StatusOr<std::string> ReadAll(ByteSource& src, size_t max_bytes);

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_IMPORT_BYTE_SOURCE_H_
