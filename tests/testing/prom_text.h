// A small parser of the Prometheus text exposition format, for tests.
#ifndef RINGSIDE_TESTS_TESTING_PROM_TEXT_H_
#define RINGSIDE_TESTS_TESTING_PROM_TEXT_H_

#include <map>
#include <string>
#include <vector>

namespace ringside::testing {

struct PromSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct PromText {
  std::vector<PromSample> samples;
  std::map<std::string, std::string> types;  // family → counter/gauge/...
  std::map<std::string, std::string> helps;
  // Samples of `name` whose labels include all of `match`.
  std::vector<PromSample> Find(const std::string& name,
                               const std::map<std::string, std::string>& match = {}) const;
};

// Parses the text; lines it cannot read are returned in `bad` (when given).
PromText ParsePromText(const std::string& text, std::vector<std::string>* bad = nullptr);

}  // namespace ringside::testing

#endif  // RINGSIDE_TESTS_TESTING_PROM_TEXT_H_
