#include "collectors/common/link_event.h"

namespace ringside::collectors {

absl::string_view LinkStateName(LinkState s) {
  switch (s) {
    case LinkState::kDown:
      return "down";
    case LinkState::kUp:
      return "up";
    case LinkState::kUnknown:
      break;
  }
  return "unknown";
}

}  // namespace ringside::collectors
