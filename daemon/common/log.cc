#include "daemon/common/log.h"

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ringside::daemon {
namespace {
std::string& Program() {
  static std::string* p = new std::string("ringside");
  return *p;
}
}  // namespace

void SetLogProgram(absl::string_view program) { Program() = std::string(program); }

void LogLine(absl::string_view message) {
  std::string line = absl::StrCat(
      Program(), " ", absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()),
      " ", message, "\n");
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace ringside::daemon
