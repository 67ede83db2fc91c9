// FUZZ_CHECK: a broken promise of a parser aborts (libFuzzer and the replay test both see it).
#ifndef RINGSIDE_TESTS_FUZZ_FUZZ_CHECK_H_
#define RINGSIDE_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond)                                                             \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                  \
    }                                                                                \
  } while (0)

#endif  // RINGSIDE_TESTS_FUZZ_FUZZ_CHECK_H_
