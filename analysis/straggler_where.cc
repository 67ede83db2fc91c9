#include "analysis/straggler_where.h"

#include <cmath>

namespace ringside::analysis {

std::string StragglerWhere(const std::map<std::string, double>& evidence) {
  auto it = evidence.find("host_share");
  if (it == evidence.end() || !std::isfinite(it->second)) return "unknown";
  return it->second >= 0.5 ? "host" : "gpu";
}

}  // namespace ringside::analysis
