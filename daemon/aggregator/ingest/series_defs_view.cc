#include "daemon/aggregator/ingest/series_defs_view.h"

#include "absl/strings/str_cat.h"
#include "daemon/aggregator/ingest/wire_reader.h"
#include "google/protobuf/stubs/common.h"

namespace ringside::daemon {
namespace {

using wire::kLen;
using wire::kVarint;
using wire::ReadLen;
using wire::ReadTag;
using wire::ReadVarint;
using wire::Tag;

// A proto3 string: protobuf refuses the message when one is not valid UTF-8.
bool ReadString(const char*& p, const char* end, absl::string_view* out) {
  if (!ReadLen(p, end, out)) return false;
  for (char c : *out) {
    if (static_cast<uint8_t>(c) >= 0x80) {
      return google::protobuf::internal::IsStructurallyValidUTF8(out->data(),
                                                                 static_cast<int>(out->size()));
    }
  }
  return true;
}

// One SeriesDef. `kind` and `width` as sent, for CheckWireDefinition.
bool ReadDefinition(absl::string_view bytes, analysis::SeriesDefinitionRef* def, int32_t* kind,
                    uint32_t* width) {
  const char* p = bytes.data();
  const char* const end = p + bytes.size();
  *def = analysis::SeriesDefinitionRef();
  def->priority = 0;  // the message's default (an agent sends -1 for none)
  *kind = 0;
  *width = 0;
  uint32_t term_width = 0;
  bool saturates = false;
  while (p < end) {
    uint64_t tag;
    uint64_t v;
    if (!ReadTag(p, end, &tag)) return false;
    switch (tag) {
      case Tag(1, kVarint):
        if (!ReadVarint(p, end, &v)) return false;
        def->id = static_cast<uint32_t>(v);
        break;
      case Tag(2, kLen):
        if (!ReadString(p, end, &def->source)) return false;
        break;
      case Tag(3, kLen):
        if (!ReadString(p, end, &def->device)) return false;
        break;
      case Tag(4, kLen):
        if (!ReadString(p, end, &def->port)) return false;
        break;
      case Tag(5, kLen):
        if (!ReadString(p, end, &def->counter)) return false;
        break;
      case Tag(6, kVarint):
        if (!ReadVarint(p, end, &v)) return false;
        def->priority = static_cast<int32_t>(static_cast<uint32_t>(v));
        break;
      case Tag(7, kVarint):
        if (!ReadVarint(p, end, &v)) return false;
        *kind = static_cast<int32_t>(static_cast<uint32_t>(v));
        break;
      case Tag(8, kVarint):
        if (!ReadVarint(p, end, &v)) return false;
        *width = static_cast<uint32_t>(v);
        break;
      case Tag(9, kLen):
        if (!ReadString(p, end, &def->unit)) return false;
        break;
      case Tag(10, kVarint):
        if (!ReadVarint(p, end, &v)) return false;
        saturates = v != 0;
        break;
      case Tag(11, kVarint):
        if (!ReadVarint(p, end, &v)) return false;
        term_width = static_cast<uint32_t>(v);
        break;
      default:
        return false;  // an unknown field or another wire type: protobuf's to judge
    }
  }
  def->saturates = saturates;
  def->term_width = term_width == 32 ? 32 : 0;  // the one term width stored
  return true;
}

// The well-formed prefix: `out->defs` cut at the first definition CheckWireDefinition refuses.
void Finish(SeriesDefsView* out, size_t malformed_at, absl::Status malformed) {
  if (!malformed.ok()) out->defs.resize(malformed_at);
  out->malformed = std::move(malformed);
}

}  // namespace

absl::Status CheckWireDefinition(uint32_t id, int32_t kind, uint32_t width) {
  if (!v1::SeriesKind_IsValid(kind)) {
    return absl::InvalidArgumentError(absl::StrCat("series ", id, ": unknown kind ", kind));
  }
  if (width > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("series ", id, ": width ", width, " is not in 0..64"));
  }
  return absl::OkStatus();
}

void SeriesDefsFromProto(const v1::SeriesDefs& defs, SeriesDefsView* out) {
  out->defs.clear();
  out->malformed = absl::OkStatus();
  out->defs_received = static_cast<size_t>(defs.defs_size());
  out->info_received = static_cast<size_t>(defs.info_size());
  out->info = defs.has_info() ? &defs : nullptr;
  out->complete_digest = defs.complete_digest();
  out->defs.reserve(defs.defs_size());
  for (const v1::SeriesDef& d : defs.defs()) {
    absl::Status s = CheckWireDefinition(d.id(), d.kind(), d.width());
    if (!s.ok()) {
      out->malformed = std::move(s);
      return;
    }
    analysis::SeriesDefinitionRef& r = out->defs.emplace_back();
    r.id = d.id();
    r.source = d.source();
    r.device = d.device();
    r.port = d.port();
    r.counter = d.counter();
    r.unit = d.unit();
    r.priority = d.priority();
    r.kind = static_cast<analysis::SeriesKind>(d.kind());
    r.width = static_cast<uint8_t>(d.width());
    r.saturates = d.saturates();
    r.term_width = d.term_width() == 32 ? 32 : 0;  // the one term width stored
  }
}

bool ParseSeriesDefsMessage(absl::string_view bytes, SeriesDefsView* out) {
  out->defs.clear();
  out->malformed = absl::OkStatus();
  out->defs_received = 0;
  out->info_received = 0;
  out->info = nullptr;
  out->info_storage.Clear();
  out->complete_digest = absl::string_view();
  // The top: seq (0) and one series_defs.
  const char* p = bytes.data();
  const char* end = p + bytes.size();
  absl::string_view body;
  bool has_body = false;
  while (p < end) {
    uint64_t tag;
    uint64_t v;
    if (!ReadTag(p, end, &tag)) return false;
    if (tag == Tag(1, kVarint)) {
      if (!ReadVarint(p, end, &v) || v != 0) return false;
    } else if (tag == Tag(11, kLen) && !has_body) {
      if (!ReadLen(p, end, &body)) return false;
      has_body = true;
    } else {
      return false;
    }
  }
  if (!has_body) return false;
  // The SeriesDefs.
  p = body.data();
  end = p + body.size();
  bool has_info = false;
  size_t malformed_at = 0;
  absl::Status malformed;
  while (p < end) {
    uint64_t tag;
    uint64_t v;
    absl::string_view field;
    if (!ReadTag(p, end, &tag)) return false;
    if (tag == Tag(1, kLen)) {
      if (!ReadLen(p, end, &field)) return false;
      int32_t kind;
      uint32_t width;
      analysis::SeriesDefinitionRef& def = out->defs.emplace_back();
      if (!ReadDefinition(field, &def, &kind, &width)) return false;
      def.kind = static_cast<analysis::SeriesKind>(kind);
      def.width = static_cast<uint8_t>(width);
      ++out->defs_received;
      if (malformed.ok()) {
        malformed = CheckWireDefinition(def.id, kind, width);
        malformed_at = out->defs.size() - 1;
      }
    } else if (tag == Tag(2, kLen)) {
      if (!ReadLen(p, end, &field)) return false;
      // A few records a node, with label maps: protobuf parses them (observers take the message).
      if (!out->info_storage.add_info()->ParseFromArray(field.data(),
                                                        static_cast<int>(field.size()))) {
        return false;
      }
      ++out->info_received;
    } else if (tag == Tag(3, kVarint)) {
      if (!ReadVarint(p, end, &v)) return false;
      has_info = v != 0;
    } else if (tag == Tag(4, kLen)) {
      if (!ReadLen(p, end, &out->complete_digest)) return false;  // the last one counts
    } else {
      return false;
    }
  }
  Finish(out, malformed_at, std::move(malformed));
  if (has_info) {
    out->info_storage.set_has_info(true);
    out->info = &out->info_storage;
  }
  return true;
}

}  // namespace ringside::daemon
