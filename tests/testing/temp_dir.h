// A fresh folder under $TMPDIR for one test, removed when it goes out of scope.
#ifndef RINGSIDE_TESTS_TESTING_TEMP_DIR_H_
#define RINGSIDE_TESTS_TESTING_TEMP_DIR_H_

#include <string>

namespace ringside::testing {

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The shared/ folder beside the repository (fixtures, data).
std::string SharedDir();
// Reads a whole file; empty if it cannot.
std::string ReadFileOrEmpty(const std::string& path);

}  // namespace ringside::testing

#endif  // RINGSIDE_TESTS_TESTING_TEMP_DIR_H_
