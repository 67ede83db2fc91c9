// ringside.v1 protocol versions spoken by this build (proto/ringside/v1/ingest.proto).
#ifndef RINGSIDE_DAEMON_COMMON_PROTOCOL_H_
#define RINGSIDE_DAEMON_COMMON_PROTOCOL_H_

#include <cstdint>

namespace ringside::daemon {

inline constexpr uint32_t kProtocolVersion = 1;     // the newest this build speaks
inline constexpr uint32_t kMinProtocolVersion = 1;  // the oldest it still accepts

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_COMMON_PROTOCOL_H_
