#include "daemon/ctl/link_text.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/ctl/relative_time.h"

namespace ringside::daemon::ctl {

namespace {

// "leaf-01 port 7", "leaf-01 Ethernet12", "leaf-01", or "-" when the topology does not know.
std::string Peer(const v1::LinkStatus& l) {
  if (l.peer_switch().empty()) return "-";
  if (l.peer_switch_port().empty()) return l.peer_switch();
  const bool number = l.peer_switch_port().find_first_not_of("0123456789") == std::string::npos;
  return absl::StrCat(l.peer_switch(), number ? " port " : " ", l.peer_switch_port());
}

}  // namespace

Table LinksTable(const google::protobuf::RepeatedPtrField<v1::LinkStatus>& links, absl::Time now,
                 bool with_node) {
  std::vector<std::string> header = {"NODE",   "SOURCE",      "DEVICE",    "PORT",
                                     "STATE",  "FLAPS",       "HEALTH",    "PEER",
                                     "LAST CHANGE", "LAST SEEN", "INCIDENTS"};
  if (!with_node) header.erase(header.begin());
  Table t(header);
  t.RightAlign(with_node ? 5 : 4);
  for (const v1::LinkStatus& l : links) {
    std::vector<std::string> ids;
    for (int k = 0; k < l.open_incident_ids_size(); ++k) {
      std::string id = absl::StrCat("#", l.open_incident_ids(k));
      if (k < l.open_incident_kinds_size()) absl::StrAppend(&id, " ", l.open_incident_kinds(k));
      ids.push_back(std::move(id));
    }
    std::vector<std::string> row = {l.node(),
                                    l.source(),
                                    l.device(),
                                    l.port().empty() ? "-" : l.port(),
                                    l.state().empty() ? "unknown" : l.state(),
                                    absl::StrCat(l.flaps_in_window()),
                                    l.healthy() ? "ok" : "UNHEALTHY",
                                    Peer(l),
                                    Ago(l.last_change_unix_nanos(), now),
                                    Ago(l.last_seen_unix_nanos(), now),
                                    ids.empty() ? "-" : absl::StrJoin(ids, ", ")};
    if (!with_node) row.erase(row.begin());
    t.AddRow(std::move(row));
  }
  return t;
}

}  // namespace ringside::daemon::ctl
