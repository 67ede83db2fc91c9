#include "daemon/aggregator/ingest/ingest_stats.h"

namespace ringside::daemon {

absl::string_view MessageTypeName(MessageType t) {
  switch (t) {
    case MessageType::kHello:
      return "hello";
    case MessageType::kSeriesDefs:
      return "series_defs";
    case MessageType::kSamples:
      return "samples";
    case MessageType::kCollectives:
      return "collectives";
    case MessageType::kLinkEvents:
      return "link_events";
    case MessageType::kOther:
    case MessageType::kCount:
      break;
  }
  return "other";
}

absl::string_view SampleRejectionName(SampleRejection r) {
  switch (r) {
    case SampleRejection::kUndefinedId:
      return "undefined_id";
    case SampleRejection::kOutOfOrder:
    case SampleRejection::kCount:
      break;
  }
  return "out_of_order";
}

absl::string_view LimitReasonName(LimitReason r) {
  switch (r) {
    case LimitReason::kMaxNodes:
      return "max_nodes";
    case LimitReason::kMaxSeriesPerNode:
      return "max_series_per_node";
    case LimitReason::kMaxDefsPerMessage:
      return "max_defs_per_message";
    case LimitReason::kMaxSessions:
      return "max_sessions";
    case LimitReason::kMaxMessageBytes:
      return "max_message_bytes";
    case LimitReason::kJournalBacklog:
    case LimitReason::kCount:
      break;
  }
  return "journal_backlog";
}

absl::string_view RefusalReasonName(RefusalReason r) {
  switch (r) {
    case RefusalReason::kNoHello:
      return "no_hello";
    case RefusalReason::kBadHello:
      return "bad_hello";
    case RefusalReason::kVersion:
      return "version";
    case RefusalReason::kPermission:
      return "permission";
    case RefusalReason::kHelloTimeout:
      return "hello_timeout";
    case RefusalReason::kLimit:
      return "limit";
    case RefusalReason::kShuttingDown:
    case RefusalReason::kCount:
      break;
  }
  return "shutting_down";
}

absl::string_view EndReasonName(EndReason r) {
  switch (r) {
    case EndReason::kClientClosed:
      return "client_closed";
    case EndReason::kCancelled:
      return "cancelled";
    case EndReason::kReplaced:
      return "replaced";
    case EndReason::kProtocolError:
      return "protocol_error";
    case EndReason::kLimit:
      return "limit";
    case EndReason::kShutdown:
    case EndReason::kCount:
      break;
  }
  return "shutdown";
}

}  // namespace ringside::daemon
