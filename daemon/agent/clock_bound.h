// The node's clock error bound, as the kernel's clock discipline reports it: adjtimex(2) with no
// modes set (a read, no privilege). The agent sends it with every batch of collective records
// (CollectiveBatch.clock), so the aggregator knows how far it may compare the enqueue times of
// ranks on different nodes (docs/detection.md, "Where the lateness is").
#ifndef RINGSIDE_DAEMON_AGENT_CLOCK_BOUND_H_
#define RINGSIDE_DAEMON_AGENT_CLOCK_BOUND_H_

#include <sys/timex.h>

#include <functional>
#include <optional>

#include "ringside/v1/ingest.pb.h"

namespace ringside::daemon {

// The system call, a seam for tests: returns the clock state (TIME_OK ... TIME_ERROR) or -1.
using AdjtimexFn = std::function<int(struct timex*)>;

// synchronized: the state is not TIME_ERROR and STA_UNSYNC is clear. The errors are timex.maxerror
// and timex.esterror (µs) in ns. nullopt when the call fails: the shipped systemd unit refuses it
// (ProtectClock=yes and ~@privileged filter adjtimex even for a read, EPERM); then the agent sends
// no bound, which the aggregator takes as unknown (docs/privileges.md).
std::optional<v1::ClockBound> ReadClockBound(const AdjtimexFn& adjtimex_fn = nullptr);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGENT_CLOCK_BOUND_H_
