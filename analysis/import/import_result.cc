#include "analysis/import/import_result.h"

namespace ringside::analysis {

uint64_t ImportedCommId(absl::string_view job_id, absl::string_view comm_name) {
  uint64_t h = 14695981039346656037ull;
  auto mix = [&h](absl::string_view s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ull;
    }
  };
  mix(job_id);
  mix("/");
  mix(comm_name);
  return h == 0 ? 1 : h;
}

void MergeStats(ImportStats& a, const ImportStats& b) {
  if (a.format.empty()) a.format = b.format;
  a.inputs += b.inputs;
  a.rows += b.rows;
  a.records += b.records;
  for (const auto& [k, v] : b.rows_by_type) a.rows_by_type[k] += v;
  for (const auto& [k, v] : b.skipped) a.skipped[k] += v;
  a.malformed += b.malformed;
  for (const std::string& e : b.malformed_examples) {
    if (a.malformed_examples.size() < 10) a.malformed_examples.push_back(e);
  }
  a.notes.insert(a.notes.end(), b.notes.begin(), b.notes.end());
  for (const auto& [k, v] : b.incomplete) a.incomplete[k] += v;
}

}  // namespace ringside::analysis
