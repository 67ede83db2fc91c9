// The agent's clock bound (daemon/agent/clock_bound.h): adjtimex's state, status and errors as
// the ClockBound sent with collective batches; a refused call sends none.
#include "daemon/agent/clock_bound.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace ringside::daemon {
namespace {

AdjtimexFn Fake(int state, int status, long maxerror_us, long esterror_us) {
  return [=](struct timex* tx) {
    EXPECT_EQ(tx->modes, 0u);  // a read: never a change of the clock
    tx->status = status;
    tx->maxerror = maxerror_us;
    tx->esterror = esterror_us;
    return state;
  };
}

TEST(ClockBoundTest, SynchronisedClockSendsItsErrorsInNanoseconds) {
  std::optional<v1::ClockBound> b = ReadClockBound(Fake(TIME_OK, STA_PLL, 1500, 20));
  ASSERT_TRUE(b.has_value());
  EXPECT_TRUE(b->synchronized());
  EXPECT_EQ(b->max_error_nanos(), 1'500'000);
  EXPECT_EQ(b->est_error_nanos(), 20'000);
}

TEST(ClockBoundTest, UnsynchronisedClockIsSaidSo) {
  EXPECT_FALSE(ReadClockBound(Fake(TIME_OK, STA_UNSYNC, 16000000, 16000000))->synchronized());
  EXPECT_FALSE(ReadClockBound(Fake(TIME_ERROR, 0, 100, 1))->synchronized());
  EXPECT_TRUE(ReadClockBound(Fake(TIME_INS, 0, 100, 1))->synchronized());  // a leap second
}

TEST(ClockBoundTest, RefusedCallSendsNoBound) {
  EXPECT_FALSE(ReadClockBound([](struct timex*) {
                 errno = EPERM;
                 return -1;
               }).has_value());
}

TEST(ClockBoundTest, ThisMachineAnswers) {
  // The real call: a read needs no privilege (outside a seccomp filter that refuses it).
  std::optional<v1::ClockBound> b = ReadClockBound();
  if (!b.has_value()) GTEST_SKIP() << "adjtimex refused here";
  EXPECT_GE(b->max_error_nanos(), 0);
}

}  // namespace
}  // namespace ringside::daemon
