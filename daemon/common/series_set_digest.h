// Definitions by reference (docs/agent-upload.md): the digest that names an agent's complete set of
// series definitions, computed the same way by the agent (from its ringside.v1 SeriesDefs) and by
// the aggregator (from the definitions it received), so that the aggregator keeps only sets whose
// digest it checked itself.
//
// The canonical form hashes each definition's fields as the aggregator keeps them, in the order
// sent (ids ascending): id, source, device, port, counter, unit (each a 4-byte length and its
// bytes), priority, kind, width, saturates and term_width (32 or 0: the one term width kept),
// little-endian. SHA-256, 32 bytes.
#ifndef RINGSIDE_DAEMON_COMMON_SERIES_SET_DIGEST_H_
#define RINGSIDE_DAEMON_COMMON_SERIES_SET_DIGEST_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "ringside/v1/ingest.pb.h"

namespace ringside::daemon {

inline constexpr size_t kSeriesSetDigestBytes = 32;

// One definition's fields as the digest takes them.
struct DigestFields {
  uint32_t id = 0;
  absl::string_view source, device, port, counter, unit;
  int32_t priority = -1;
  uint32_t kind = 0;
  uint32_t width = 0;
  bool saturates = false;
  uint32_t term_width = 0;
};

class SeriesSetDigest {
 public:
  SeriesSetDigest();
  ~SeriesSetDigest();
  SeriesSetDigest(const SeriesSetDigest&) = delete;
  SeriesSetDigest& operator=(const SeriesSetDigest&) = delete;

  void Add(const DigestFields& d);
  void Add(const v1::SeriesDef& def);
  // The 32-byte digest of everything added; the digest starts again empty.
  std::string Finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_COMMON_SERIES_SET_DIGEST_H_
