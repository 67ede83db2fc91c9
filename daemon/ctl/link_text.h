// The links table of `ringside links` and `ringside node`.
#ifndef RINGSIDE_DAEMON_CTL_LINK_TEXT_H_
#define RINGSIDE_DAEMON_CTL_LINK_TEXT_H_

#include "absl/time/time.h"
#include "daemon/ctl/table.h"
#include "google/protobuf/repeated_field.h"
#include "ringside/v1/query.pb.h"

namespace ringside::daemon::ctl {

// NODE (when with_node), SOURCE, DEVICE, PORT, STATE, FLAPS, HEALTH, PEER (the switch end:
// "leaf-01 port 7", "-" when unknown), LAST CHANGE, LAST SEEN, INCIDENTS ("#12 link_flapping").
Table LinksTable(const google::protobuf::RepeatedPtrField<v1::LinkStatus>& links, absl::Time now,
                 bool with_node);

}  // namespace ringside::daemon::ctl

#endif  // RINGSIDE_DAEMON_CTL_LINK_TEXT_H_
