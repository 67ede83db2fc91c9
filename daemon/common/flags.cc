#include "daemon/common/flags.h"

namespace ringside::daemon {

std::vector<std::string> NormalizeFlagNames(int argc, char** argv) {
  std::vector<std::string> out;
  bool rest = false;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (i > 0 && !rest && arg == "--") rest = true;
    if (i > 0 && !rest && arg.size() > 1 && arg[0] == '-') {
      size_t start = arg.find_first_not_of('-');
      size_t end = arg.find('=');
      if (end == std::string::npos) end = arg.size();
      for (size_t k = start; k != std::string::npos && k < end; ++k) {
        if (arg[k] == '-' || arg[k] == '.') arg[k] = '_';
      }
    }
    out.push_back(std::move(arg));
  }
  return out;
}

std::vector<char*> ArgvPointers(std::vector<std::string>& args) {
  std::vector<char*> out;
  for (std::string& a : args) out.push_back(a.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace ringside::daemon
