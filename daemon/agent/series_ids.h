// Stable upload ids for the agent's series: one id per (source, device, port, counter, priority)
// for the agent's lifetime, assigned from 1 upward and never reused, with the ringside.v1 SeriesDef
// the aggregator needs to interpret the id's values. No locking: the Uploader owns one under its
// mutex.
#ifndef RINGSIDE_DAEMON_AGENT_SERIES_IDS_H_
#define RINGSIDE_DAEMON_AGENT_SERIES_IDS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "collectors/common/series.h"
#include "ringside/v1/ingest.pb.h"

namespace ringside::daemon {

// The wire form of a collector's series definition (width 0 for gauges and states).
v1::SeriesDef ToProtoSeriesDef(const collectors::SeriesDef& def, uint32_t id);

class SeriesIds {
 public:
  // The ids of `table`'s defs, parallel to table->defs. A collector's table only changes when it
  // rediscovers its devices, so the result is cached per collector until its table changes.
  // Ids first seen, and ids whose definition (kind, width, unit, saturation) changed since they
  // were last defined, are appended to `changed` (when given): they must be (re)defined before
  // their next use.
  const std::vector<uint32_t>& IdsFor(const std::string& collector,
                                      const std::shared_ptr<const collectors::SeriesTable>& table,
                                      std::vector<uint32_t>* changed = nullptr);

  // The definition of an id from IdsFor.
  const v1::SeriesDef& Def(uint32_t id) const { return defs_[id]; }
  // The highest id assigned so far (ids are 1..size()).
  uint32_t size() const { return static_cast<uint32_t>(defs_.size() - 1); }

 private:
  using Key = std::tuple<std::string, std::string, std::string, std::string, int>;
  struct Cached {
    std::shared_ptr<const collectors::SeriesTable> table;
    std::vector<uint32_t> ids;
  };
  std::map<Key, uint32_t> by_key_;
  std::vector<v1::SeriesDef> defs_ = std::vector<v1::SeriesDef>(1);  // [0] unused
  std::map<std::string, Cached> cache_;
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGENT_SERIES_IDS_H_
