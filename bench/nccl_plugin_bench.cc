// ringside-nccl-plugin-bench: the cost of libringside_nccl.so on the thread that calls it.
//
// It loads the built plugin with dlopen and calls it through ncclProfiler_v6 (the newest table it
// exports) as NCCL does, on 1 thread and on 8 threads at once (each thread its own communicator,
// as with one GPU per thread):
//   pair        startEvent(Coll) + stopEvent(Coll) with nChannels = 0: the Coll completes at its
//               stop, so each pair also encodes its record into the ring (everything the
//               application thread pays per collective);
//   collective  Group start/stop + Coll start/stop + 2 × KernelCh (start, state 22, stop): the
//               whole per-collective sequence, the profiler thread's share run here too;
//   pair, ring full   the same pair with no agent: the ring is full and the record is dropped and
//               counted instead of encoded.
// Timed runs report CPU time (CLOCK_THREAD_CPUTIME_ID) and wall time per operation. They go in
// bursts that the agent stand-in fully drains in between (untimed), so every measured record was
// really encoded into the ring; the stand-in parses the batch headers and reports the plugin's
// drop count (0 expected). A separate pass arms a seccomp filter on each measuring thread that
// traps and counts every system call (tests/testing/syscall_trap.h): 0 expected. Single pairs are
// also timed one by one for percentiles.
#include <dlfcn.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tests/testing/syscall_trap.h"

ABSL_FLAG(std::string, plugin, RINGSIDE_NCCL_PLUGIN, "The plugin to load.");
ABSL_FLAG(int64_t, pairs, 1'000'000, "Start/stop pairs per thread per run.");
ABSL_FLAG(int64_t, collectives, 300'000, "Whole collectives per thread per run.");
ABSL_FLAG(std::string, threads, "1,8", "Thread counts to run, comma-separated.");
ABSL_FLAG(std::string, agent, "drain", "drain: a reader on the socket; none: no agent.");
ABSL_FLAG(bool, seccomp, true, "Count system calls on the measuring threads with a seccomp trap.");
ABSL_FLAG(int, rounds, 3, "Runs of each measurement; the best is reported.");

namespace {

using Logger = void (*)(int, unsigned long, const char*, int, const char*, ...);
using InitV7 = int (*)(void**, uint64_t, int*, const char*, int, int, int, Logger);
using StartFn = int (*)(void*, void**, void*);
using StopFn = int (*)(void*);
using StateFn = int (*)(void*, int, void*);
using FinalizeFn = int (*)(void*);

struct Table {
  const char* name;
  InitV7 init;
  StartFn start;
  StopFn stop;
  StateFn state;
  FinalizeFn finalize;
};
Table g_table;
int g_mask = 0;

void QuietLog(int, unsigned long, const char*, int, const char*, ...) {}

int64_t Nanos(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// v6 descriptors (112 bytes), zero-filled, laid out from the reference's offsets.
struct Descr {
  alignas(8) unsigned char b[112] = {};
  template <typename T>
  void Put(size_t off, T v) {
    std::memcpy(b + off, &v, sizeof(v));
  }
};

Descr CollDescr(int channels) {
  Descr d;
  d.Put<uint64_t>(0, 1 << 1);  // Coll
  d.Put<int>(16, 0);
  d.Put<const char*>(32, "AllReduce");
  d.Put<size_t>(56, 1 << 20);
  d.Put<const char*>(72, "ncclBfloat16");
  d.Put<uint8_t>(80, static_cast<uint8_t>(channels));
  d.Put<const char*>(88, "RING");
  d.Put<const char*>(96, "LL128");
  return d;
}

// The agent stand-in: accepts connections, reads everything, and sums record_count and dropped
// from the batch headers (96 bytes: count at 12, dropped at 24; 352 bytes per record).
class Drain {
 public:
  explicit Drain(const std::string& path) : path_(path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr = {};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.data(), path.size());
    ::unlink(path.c_str());
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(fd_, 64) != 0) {
      std::perror("drain: bind/listen");
      std::exit(1);
    }
    thread_ = std::thread([this] { Loop(); });
  }
  ~Drain() {
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  uint64_t records() const { return records_.load(); }
  uint64_t dropped() const { return dropped_.load(); }

 private:
  void Loop() {
    std::vector<std::thread> readers;
    for (;;) {
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) break;
      readers.emplace_back([this, c] { Read(c); });
    }
    for (auto& r : readers) r.join();
  }
  void Read(int c) {
    std::vector<unsigned char> buf;
    unsigned char chunk[1 << 16];
    for (;;) {
      const ssize_t n = ::read(c, chunk, sizeof(chunk));
      if (n <= 0) break;
      buf.insert(buf.end(), chunk, chunk + n);
      size_t off = 0;
      while (buf.size() - off >= 96) {
        uint32_t count;
        uint64_t dropped;
        std::memcpy(&count, buf.data() + off + 12, 4);
        std::memcpy(&dropped, buf.data() + off + 24, 8);
        const size_t frame = 96 + size_t{count} * 352;
        if (buf.size() - off < frame) break;
        records_ += count;
        dropped_ += dropped;
        off += frame;
      }
      buf.erase(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(off));
    }
    ::close(c);
  }
  std::string path_;
  int fd_ = -1;
  std::atomic<uint64_t> records_{0};
  std::atomic<uint64_t> dropped_{0};
  std::thread thread_;
};

Drain* g_drain = nullptr;
std::atomic<uint64_t> g_made{0};  // records made (completed collectives) in this run

struct Result {
  double cpu_ns = 0;   // per operation
  double wall_ns = 0;  // per operation
  uint64_t syscalls = 0;
  long last_syscall = -1;
  bool trapped = false;
};

struct Thread {
  void* ctx = nullptr;
  Descr pair = CollDescr(0);
  Descr coll = CollDescr(2);
  Descr group;
  Descr kch;
  uint64_t seq = 0;

  explicit Thread(uint64_t comm_id) {
    g_table.init(&ctx, comm_id, &g_mask, "bench", 1, 8, static_cast<int>(comm_id % 8), &QuietLog);
    group.Put<uint64_t>(0, 1 << 0);
    kch.Put<uint64_t>(0, 1 << 6);
  }
  void Pairs(int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      pair.Put<uint64_t>(24, seq++);
      void* h;
      g_table.start(ctx, &h, pair.b);
      g_table.stop(h);
    }
  }
  void Collectives(int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      coll.Put<uint64_t>(24, seq++);
      void *g, *c;
      g_table.start(ctx, &g, group.b);
      coll.Put<void*>(104, g);
      g_table.start(ctx, &c, coll.b);
      g_table.stop(c);
      g_table.stop(g);
      for (int ch = 0; ch < 2; ++ch) {
        kch.Put<void*>(8, c);
        kch.Put<uint8_t>(24, static_cast<uint8_t>(ch));
        kch.Put<uint64_t>(32, 1'700'000'000'000'000'000ull + seq * 1000);
        void* k;
        g_table.start(ctx, &k, kch.b);
        uint64_t stop = 1'700'000'000'000'000'000ull + seq * 1000 + 500;
        g_table.state(k, 22, &stop);
        g_table.stop(k);
      }
    }
  }
  void Run(const std::string& kind, int64_t n) {
    if (kind == "collective") {
      Collectives(n);
    } else {
      Pairs(n);
    }
  }
};

// Timed: bursts of `burst` operations, each followed (untimed) by a wait until the agent stand-in
// has every record made so far, so no measured record met a full ring.
Result Timed(Thread& t, const std::string& kind, int64_t ops, int64_t burst) {
  Result r;
  int64_t cpu = 0, wall = 0;
  for (int64_t done = 0; done < ops;) {
    const int64_t n = std::min(burst, ops - done);
    const int64_t c0 = Nanos(CLOCK_THREAD_CPUTIME_ID), w0 = Nanos(CLOCK_MONOTONIC);
    t.Run(kind, n);
    wall += Nanos(CLOCK_MONOTONIC) - w0;
    cpu += Nanos(CLOCK_THREAD_CPUTIME_ID) - c0;
    done += n;
    const uint64_t made = g_made += static_cast<uint64_t>(n);
    if (g_drain != nullptr) {
      const int64_t deadline = Nanos(CLOCK_MONOTONIC) + 5'000'000'000;
      while (g_drain->records() + g_drain->dropped() < made && Nanos(CLOCK_MONOTONIC) < deadline) {
        std::this_thread::yield();
      }
    }
  }
  r.cpu_ns = static_cast<double>(cpu) / static_cast<double>(ops);
  r.wall_ns = static_cast<double>(wall) / static_cast<double>(ops);
  return r;
}

// Counted: the same calls under a seccomp filter that traps every system call of this thread.
Result Counted(Thread& t, const std::string& kind, int64_t ops) {
  Result r;
  r.trapped = ringside::testing::SyscallTrap::Arm();
  t.Run(kind, ops);
  if (r.trapped) {
    r.syscalls = ringside::testing::SyscallTrap::Disarm();
    r.last_syscall = ringside::testing::SyscallTrap::last_syscall();
  }
  return r;
}

// Percentiles of single pairs, each timed with two vDSO clock reads (their cost is subtracted).
std::vector<double> PairPercentiles(int64_t samples) {
  Thread t(777);
  std::vector<int64_t> d(static_cast<size_t>(samples));
  int64_t floor_ns = INT64_MAX;
  for (int i = 0; i < 100000; ++i) {
    const int64_t a = Nanos(CLOCK_MONOTONIC);
    floor_ns = std::min(floor_ns, Nanos(CLOCK_MONOTONIC) - a);
  }
  for (int64_t i = 0; i < samples; ++i) {
    if (i % 1024 == 0 && g_drain != nullptr) {
      while (g_drain->records() + g_drain->dropped() < g_made) std::this_thread::yield();
    }
    const int64_t a = Nanos(CLOCK_MONOTONIC);
    t.Pairs(1);
    d[static_cast<size_t>(i)] = Nanos(CLOCK_MONOTONIC) - a - floor_ns;
    ++g_made;
  }
  g_table.finalize(t.ctx);
  std::sort(d.begin(), d.end());
  std::vector<double> out;
  for (double q : {0.5, 0.9, 0.99, 0.999}) {
    out.push_back(
        static_cast<double>(d[static_cast<size_t>(q * static_cast<double>(samples - 1))]));
  }
  out.push_back(static_cast<double>(d.back()));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("ringside-nccl-plugin-bench: hot-path cost of libringside_nccl.so");
  absl::ParseCommandLine(argc, argv);
  const bool seccomp = absl::GetFlag(FLAGS_seccomp);
  if (seccomp) ringside::testing::SyscallTrap::InstallHandler();

  char dir_template[] = "/tmp/ringside-nccl-bench-XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  const std::string socket = dir + "/collectives.sock";
  setenv("RINGSIDE_SOCKET", socket.c_str(), 1);
  setenv("RINGSIDE_JOB_ID", "bench", 1);
  std::unique_ptr<Drain> drain;
  if (absl::GetFlag(FLAGS_agent) == "drain") drain = std::make_unique<Drain>(socket);

  void* lib = dlopen(absl::GetFlag(FLAGS_plugin).c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  std::memcpy(&g_table, dlsym(lib, "ncclProfiler_v6"), sizeof(g_table));

  std::printf("plugin %s, agent stand-in %s, best of %d runs\n",
              absl::GetFlag(FLAGS_plugin).c_str(), absl::GetFlag(FLAGS_agent).c_str(),
              absl::GetFlag(FLAGS_rounds));
  std::printf("%-17s %7s %11s %12s %14s\n", "operation", "threads", "CPU ns/op", "wall ns/op",
              "total ops/s");
  g_drain = drain.get();
  auto run = [&](const std::string& kind, const std::string& label, int threads, bool drained) {
    const int64_t ops =
        kind == "pair" ? absl::GetFlag(FLAGS_pairs) : absl::GetFlag(FLAGS_collectives);
    // Bursts that fit the ring (4096 records) together, with room to spare.
    const int64_t burst = drained ? std::max<int64_t>(16, 2048 / threads) : ops;
    double best_cpu = 1e18, best_wall = 1e18, best_rate = 0;
    for (int round = 0; round < absl::GetFlag(FLAGS_rounds); ++round) {
      std::vector<std::unique_ptr<Thread>> ts;
      for (int i = 0; i < threads; ++i) {
        ts.push_back(std::make_unique<Thread>(1000 + static_cast<uint64_t>(round * 64 + i)));
      }
      if (!drained) {  // fill the ring first: every measured record is then dropped
        ts[0]->Pairs(8192);
      }
      std::vector<Result> results(static_cast<size_t>(threads));
      std::vector<std::thread> pool;
      const int64_t w0 = Nanos(CLOCK_MONOTONIC);
      for (int i = 0; i < threads; ++i) {
        pool.emplace_back([&, i] {
          results[static_cast<size_t>(i)] = Timed(*ts[static_cast<size_t>(i)], kind, ops, burst);
        });
      }
      for (auto& th : pool) th.join();
      const double wall_s = static_cast<double>(Nanos(CLOCK_MONOTONIC) - w0) / 1e9;
      for (auto& t : ts) g_table.finalize(t->ctx);
      double cpu = 0, wall = 0;
      for (const Result& r : results) {
        cpu += r.cpu_ns / threads;
        wall += r.wall_ns / threads;
      }
      best_cpu = std::min(best_cpu, cpu);
      best_wall = std::min(best_wall, wall);
      best_rate = std::max(best_rate, static_cast<double>(ops) * threads / wall_s);
    }
    std::printf("%-17s %7d %11.1f %12.1f %14.0f\n", label.c_str(), threads, best_cpu, best_wall,
                best_rate);
  };
  std::vector<int> thread_counts;
  for (absl::string_view t : absl::StrSplit(absl::GetFlag(FLAGS_threads), ',')) {
    thread_counts.push_back(std::atoi(std::string(t).c_str()));
  }
  for (const char* kind : {"pair", "collective"}) {
    for (int threads : thread_counts) run(kind, kind, threads, drain != nullptr);
  }
  if (drain != nullptr) {
    std::printf("records the agent stand-in received %llu, drops the plugin reported %llu\n",
                static_cast<unsigned long long>(drain->records()),
                static_cast<unsigned long long>(drain->dropped()));
  }
  // The ring-full path: no agent reads, so each record is dropped and counted.
  // (The sender reads RINGSIDE_SOCKET again when a communicator starts after all were finalized.)
  {
    Drain* saved = g_drain;
    g_drain = nullptr;
    setenv("RINGSIDE_SOCKET", (dir + "/nobody-listens.sock").c_str(), 1);
    for (int threads : thread_counts) run("pair", "pair, ring full", threads, false);
    setenv("RINGSIDE_SOCKET", socket.c_str(), 1);
    g_drain = saved;
  }

  if (seccomp) {
    for (const char* kind : {"pair", "collective"}) {
      for (int threads : thread_counts) {
        std::vector<std::unique_ptr<Thread>> ts;
        for (int i = 0; i < threads; ++i) ts.push_back(std::make_unique<Thread>(5000 + i));
        std::vector<Result> results(static_cast<size_t>(threads));
        std::vector<std::thread> pool;
        const int64_t ops = std::min<int64_t>(absl::GetFlag(FLAGS_pairs), 200'000);
        for (int i = 0; i < threads; ++i) {
          pool.emplace_back([&, i] {
            results[static_cast<size_t>(i)] = Counted(*ts[static_cast<size_t>(i)], kind, ops);
          });
        }
        for (auto& th : pool) th.join();
        for (auto& t : ts) g_table.finalize(t->ctx);
        uint64_t n = 0;
        bool armed = true;
        long last = -1;
        for (const Result& r : results) {
          n += r.syscalls;
          armed &= r.trapped;
          if (r.syscalls > 0) last = r.last_syscall;
        }
        if (!armed) {
          std::printf("system calls: seccomp not available here\n");
        } else {
          std::printf("system calls on the calling threads, %s x %lld on %d thread(s): %llu%s\n",
                      kind, static_cast<long long>(ops) * threads, threads,
                      static_cast<unsigned long long>(n),
                      n > 0 ? absl::StrCat(" (last: nr ", last, ")").c_str() : "");
        }
      }
    }
  }

  const std::vector<double> p = PairPercentiles(1'000'000);
  std::printf(
      "single pairs, 1 thread (timer cost subtracted): p50 %.0f ns, p90 %.0f, p99 %.0f, "
      "p99.9 %.0f, max %.0f\n",
      p[0], p[1], p[2], p[3], p[4]);
  dlclose(lib);
  drain.reset();
  ::rmdir(dir.c_str());
  return 0;
}
