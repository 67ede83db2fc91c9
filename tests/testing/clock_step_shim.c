/* A test-only LD_PRELOAD library that steps a process's wall clock (an NTP step) without touching
 * the machine's clock. The offset, in nanoseconds, is an int64 at the start of the file named by
 * RINGSIDE_CLOCK_OFFSET_FILE, mapped shared, so a test moves the clock of a running process by
 * storing a new value (tests/testing/clock_step.h).
 *
 * What it shifts: clock_gettime(CLOCK_REALTIME, CLOCK_REALTIME_COARSE), gettimeofday and time —
 * what glibc, libstdc++'s system_clock, Abseil's absl::Now() and gRPC read. Monotonic clocks are
 * left alone, as a real step leaves them.
 *
 * A real step also moves deadlines already handed to the kernel against CLOCK_REALTIME: Abseil's
 * timed waits (Mutex::AwaitWithDeadline, Notification::WaitForNotificationWithTimeout, ...) are
 * futex(FUTEX_WAIT_BITSET | FUTEX_CLOCK_REALTIME) calls with an absolute deadline, made through
 * syscall(). The shim turns each into waits of at most 20 ms on the monotonic clock and returns
 * ETIMEDOUT only once the shifted clock has reached the deadline, so a wait in progress when the
 * clock steps back lasts as long as it would on a real machine. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static const volatile int64_t* g_offset;
typedef int (*ClockFn)(clockid_t, struct timespec*);
static ClockFn g_real_clock;

__attribute__((constructor)) static void MapOffset(void) {
  g_real_clock = (ClockFn)dlsym(RTLD_NEXT, "clock_gettime");
  const char* path = getenv("RINGSIDE_CLOCK_OFFSET_FILE");
  if (path == NULL || *path == '\0') return;
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  void* p = mmap(NULL, sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (p != MAP_FAILED) g_offset = (const volatile int64_t*)p;
}

static int64_t Offset(void) { return g_offset ? __atomic_load_n(g_offset, __ATOMIC_RELAXED) : 0; }

static int RealClock(clockid_t clk, struct timespec* ts) {
  if (g_real_clock == NULL) g_real_clock = (ClockFn)dlsym(RTLD_NEXT, "clock_gettime");
  return g_real_clock(clk, ts);
}

static void Shift(struct timespec* ts, int64_t ns) {
  int64_t t = (int64_t)ts->tv_sec * 1000000000LL + ts->tv_nsec + ns;
  ts->tv_sec = t / 1000000000LL;
  ts->tv_nsec = t % 1000000000LL;
  if (ts->tv_nsec < 0) {
    ts->tv_nsec += 1000000000LL;
    ts->tv_sec -= 1;
  }
}

static int64_t NanosOf(const struct timespec* ts) {
  return (int64_t)ts->tv_sec * 1000000000LL + ts->tv_nsec;
}

int clock_gettime(clockid_t clk, struct timespec* ts) {
  const int r = RealClock(clk, ts);
  if (r == 0 && (clk == CLOCK_REALTIME || clk == CLOCK_REALTIME_COARSE)) Shift(ts, Offset());
  return r;
}

int gettimeofday(struct timeval* tv, void* tz) {
  (void)tz;
  struct timespec ts;
  if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return -1;
  tv->tv_sec = ts.tv_sec;
  tv->tv_usec = ts.tv_nsec / 1000;
  return 0;
}

time_t time(time_t* out) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  if (out != NULL) *out = ts.tv_sec;
  return ts.tv_sec;
}

typedef long (*SyscallFn)(long, ...);

static long RealSyscall6(long n, long a, long b, long c, long d, long e, long f) {
  static SyscallFn real;
  if (real == NULL) real = (SyscallFn)dlsym(RTLD_NEXT, "syscall");
  return real(n, a, b, c, d, e, f);
}

/* futex(FUTEX_WAIT_BITSET | FUTEX_CLOCK_REALTIME) with an absolute deadline on the shifted
 * clock. */
static long FutexRealtimeWait(long uaddr, long op, long val, const struct timespec* deadline,
                              long uaddr2, long val3) {
  const int64_t until = NanosOf(deadline);
  const long mono_op = op & ~FUTEX_CLOCK_REALTIME;
  for (;;) {
    struct timespec now;
    RealClock(CLOCK_REALTIME, &now);
    const int64_t left = until - (NanosOf(&now) + Offset());
    if (left <= 0) {
      errno = ETIMEDOUT;
      return -1;
    }
    struct timespec chunk;
    RealClock(CLOCK_MONOTONIC, &chunk);
    Shift(&chunk, left < 20000000LL ? left : 20000000LL);
    const long r = RealSyscall6(SYS_futex, uaddr, mono_op, val, (long)&chunk, uaddr2, val3);
    if (r == 0 || errno != ETIMEDOUT) return r;
  }
}

long syscall(long n, ...) {
  va_list ap;
  va_start(ap, n);
  const long a = va_arg(ap, long), b = va_arg(ap, long), c = va_arg(ap, long);
  const long d = va_arg(ap, long), e = va_arg(ap, long), f = va_arg(ap, long);
  va_end(ap);
  if (n == SYS_futex && (b & FUTEX_CLOCK_REALTIME) != 0 &&
      (b & FUTEX_CMD_MASK) == FUTEX_WAIT_BITSET && d != 0) {
    return FutexRealtimeWait(a, b, c, (const struct timespec*)d, e, f);
  }
  if (n == SYS_clock_gettime && (a == CLOCK_REALTIME || a == CLOCK_REALTIME_COARSE)) {
    return clock_gettime((clockid_t)a, (struct timespec*)b);
  }
  return RealSyscall6(n, a, b, c, d, e, f);
}
