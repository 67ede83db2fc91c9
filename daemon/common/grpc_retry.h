// One more try of a read-only unary call that could not connect.
//
// Debian 12's gRPC (1.51) now and then fails a connect that is still in progress: its posix TCP
// client reads errno only after other calls have overwritten it, and reports the channel's first
// connect as failed ("connect: No such file or directory", UNAVAILABLE); grpc/grpc#35064 fixed it
// upstream. A fail-fast call then fails although the server is up: about 1 connect in 500 on
// loopback here. A call that only reads is safe to send again; the second try waits for the
// channel to connect (its next attempt is GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS later, 1 s by
// default, 200 ms on the CLI's and a replica's peer channels) but no longer than `reconnect_wait`,
// so a server that is really down costs that wait, and the first error is the one returned.
#ifndef RINGSIDE_DAEMON_COMMON_GRPC_RETRY_H_
#define RINGSIDE_DAEMON_COMMON_GRPC_RETRY_H_

#include <algorithm>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"

namespace ringside::daemon {

// `call(grpc::ClientContext*)` sends the call and returns its status; it is sent again, with a
// fresh context, when the first try ends UNAVAILABLE. Both tries end by `deadline`.
template <typename Call>
grpc::Status CallWithReconnect(absl::Time deadline, absl::Duration reconnect_wait, Call call) {
  grpc::Status first;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(deadline));
    first = call(&ctx);
  }
  if (first.error_code() != grpc::StatusCode::UNAVAILABLE) return first;
  grpc::ClientContext again;
  again.set_wait_for_ready(true);
  again.set_deadline(absl::ToChronoTime(std::min(deadline, absl::Now() + reconnect_wait)));
  grpc::Status second = call(&again);
  if (second.ok() || second.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) return second;
  return first;
}

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_COMMON_GRPC_RETRY_H_
