// A file as an analysis::ByteSource: the only file I/O of `ringside import-trace` ("-" is stdin).
#ifndef RINGSIDE_DAEMON_CTL_FILE_SOURCE_H_
#define RINGSIDE_DAEMON_CTL_FILE_SOURCE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "analysis/import/byte_source.h"

namespace ringside::daemon::ctl {

class FileSource : public analysis::ByteSource {
 public:
  // NotFound / PermissionDenied / FailedPrecondition (a folder) naming the path.
  static absl::StatusOr<std::unique_ptr<FileSource>> Open(const std::string& path);
  ~FileSource() override;
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;

  absl::StatusOr<size_t> Read(char* buf, size_t n) override;

 private:
  FileSource(int fd, std::string path, bool owned)
      : fd_(fd), path_(std::move(path)), owned_(owned) {}
  int fd_;
  std::string path_;
  bool owned_;
};

}  // namespace ringside::daemon::ctl

#endif  // RINGSIDE_DAEMON_CTL_FILE_SOURCE_H_
