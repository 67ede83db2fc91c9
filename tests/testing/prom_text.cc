#include "tests/testing/prom_text.h"

#include <cstdlib>
#include <sstream>

namespace ringside::testing {

std::vector<PromSample> PromText::Find(const std::string& name,
                                       const std::map<std::string, std::string>& match) const {
  std::vector<PromSample> out;
  for (const PromSample& s : samples) {
    if (s.name != name) continue;
    bool ok = true;
    for (const auto& [k, v] : match) {
      auto it = s.labels.find(k);
      if (it == s.labels.end() || it->second != v) ok = false;
    }
    if (ok) out.push_back(s);
  }
  return out;
}

PromText ParsePromText(const std::string& text, std::vector<std::string>* bad) {
  PromText out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.rfind("# TYPE ", 0) == 0 || line.rfind("# HELP ", 0) == 0) {
      std::string rest = line.substr(7);
      size_t sp = rest.find(' ');
      std::string fam = rest.substr(0, sp);
      std::string val = sp == std::string::npos ? "" : rest.substr(sp + 1);
      (line[2] == 'T' ? out.types : out.helps)[fam] = val;
      continue;
    }
    if (line[0] == '#') continue;
    PromSample s;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    s.name = line.substr(0, i);
    bool ok = true;
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        size_t eq = line.find('=', i);
        if (eq == std::string::npos || eq + 1 >= line.size() || line[eq + 1] != '"') {
          ok = false;
          break;
        }
        std::string key = line.substr(i, eq - i);
        std::string val;
        size_t j = eq + 2;
        for (; j < line.size() && line[j] != '"'; ++j) {
          if (line[j] == '\\' && j + 1 < line.size()) {
            ++j;
            val.push_back(line[j] == 'n' ? '\n' : line[j]);
          } else {
            val.push_back(line[j]);
          }
        }
        s.labels[key] = val;
        i = j + 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
      ++i;  // '}'
    }
    while (i < line.size() && line[i] == ' ') ++i;
    if (!ok || i >= line.size()) {
      if (bad) bad->push_back(line);
      continue;
    }
    char* end = nullptr;
    std::string num = line.substr(i);
    size_t sp = num.find(' ');
    if (sp != std::string::npos) num = num.substr(0, sp);  // drop a timestamp
    s.value = std::strtod(num.c_str(), &end);
    if (end == num.c_str()) {
      if (bad) bad->push_back(line);
      continue;
    }
    out.samples.push_back(std::move(s));
  }
  return out;
}

}  // namespace ringside::testing
