#include "daemon/agent/series_ids.h"

#include <utility>

#include "google/protobuf/util/message_differencer.h"

namespace ringside::daemon {

v1::SeriesDef ToProtoSeriesDef(const collectors::SeriesDef& def, uint32_t id) {
  v1::SeriesDef out;
  out.set_id(id);
  out.set_source(def.source);
  out.set_device(def.device);
  out.set_port(def.port);
  out.set_counter(def.counter);
  out.set_priority(def.priority);
  switch (def.kind) {
    case collectors::SeriesKind::kCounter:
      out.set_kind(v1::SERIES_KIND_COUNTER);
      out.set_width(def.width);
      break;
    case collectors::SeriesKind::kGauge:
      out.set_kind(v1::SERIES_KIND_GAUGE);
      break;
    case collectors::SeriesKind::kState:
      out.set_kind(v1::SERIES_KIND_STATE);
      break;
  }
  out.set_unit(std::string(collectors::UnitName(def.unit)));
  out.set_saturates(def.saturates);
  out.set_term_width(def.term_width);
  return out;
}

const std::vector<uint32_t>& SeriesIds::IdsFor(
    const std::string& collector, const std::shared_ptr<const collectors::SeriesTable>& table,
    std::vector<uint32_t>* changed) {
  Cached& c = cache_[collector];
  if (c.table == table) return c.ids;
  c.table = table;
  c.ids.clear();
  if (!table) return c.ids;
  c.ids.reserve(table->defs.size());
  for (const collectors::SeriesDef& def : table->defs) {
    Key key{def.source, def.device, def.port, def.counter, def.priority};
    auto [it, inserted] = by_key_.try_emplace(std::move(key), static_cast<uint32_t>(defs_.size()));
    const uint32_t id = it->second;
    v1::SeriesDef proto = ToProtoSeriesDef(def, id);
    if (inserted) {
      defs_.push_back(std::move(proto));
      if (changed) changed->push_back(id);
    } else if (!google::protobuf::util::MessageDifferencer::Equals(defs_[id], proto)) {
      defs_[id] = std::move(proto);
      if (changed) changed->push_back(id);
    }
    c.ids.push_back(id);
  }
  return c.ids;
}

}  // namespace ringside::daemon
