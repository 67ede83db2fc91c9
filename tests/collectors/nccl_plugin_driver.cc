// nccl_plugin_driver: plays NCCL for libringside_nccl.so in one process (one rank), the way NCCL
// drives a profiler plugin: dlopen, dlsym("ncclProfiler_vN"), init with that version's argument
// order, then per collective Group start → Coll start → Coll stop → Group stop on the application
// thread, and the KernelCh events (start with the GPU start time, state 22 with the GPU stop time,
// stop) later, on another thread, after the Coll stop; finalize; dlclose.
//
// It deliberately does not include the plugin's own ABI declarations: descriptors are laid out
// byte by byte from the offsets in ../shared/reference/nccl-profiler-abi.md, so a wrong declaration
// in the plugin shows up as wrong records.
//
//   nccl_plugin_driver --plugin=PATH --version=4|5|6 --mode=plan|count|fork|weird|straggler|ce
//       [--rank=R --nranks=N --collectives=K] [--socket=PATH] [--env=NAME=VALUE ...]
//       [--preload-local=PATH] [--preload-global=PATH]
//       [--wait-file=PATH] [--seccomp] [--late-rank=L --t0=UNIX_NS] [--gpus=G]
//
// plan:  2 communicators × K collectives from nccl_driver_plan.h.
// count: K AllReduce collectives (2 channels each) on one thread, timed, then (after --wait-file
//        exists) one more and finalize. --seccomp: the K run under a filter that counts syscalls.
// fork:  collectives before and after a fork, in the parent and in the child.
// weird: odd inputs NCCL may send (NULL strings, zero channels, unknown events, NULL handles).
// straggler: K AllReduce on one communicator "world" of N ranks, one every 10 ms from --t0 (the
//        same for every rank): rank L arrives 4 ms late, so its kernel runs 1 ms and the others
//        wait 4 ms more (5 ms); it is busy 90 % of each step, the others 50 %. --gpus=G: this
//        one process drives G GPUs, ranks R..R+G-1 of the communicator (JAX, some PyTorch
//        launchers): each rank's init runs on a thread of its own after cudaSetDevice(g) (from a
//        fake libcudart preloaded with --preload-global), as NCCL initialises a communicator on
//        the thread that made its device current; then the collectives of every local rank run
//        in turn on the main thread.
//
// Lines on stdout: "pid P", "mask M", "enqueue COMM I BEFORE AFTER", "count N WALL_NS MAX_NS",
// "syscalls N LAST", "child-pid P", "done". Exit status 0 when everything was called.
#include <dlfcn.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/collectors/nccl_driver_plan.h"
#include "tests/testing/syscall_trap.h"

namespace {

namespace plan = ringside::testing::nccl_plan;

// --- The ABI as NCCL sees it, from the reference's tables ----------------------------------------

using Logger = void (*)(int, unsigned long, const char*, int, const char*, ...);
using InitV4 = int (*)(void**, int*, const char*, uint64_t, int, int, int, Logger);
using InitV5 = int (*)(void**, uint64_t, int*, const char*, int, int, int, Logger);
using StartFn = int (*)(void*, void**, void*);
using StopFn = int (*)(void*);
using StateFn = int (*)(void*, int, void*);
using FinalizeFn = int (*)(void*);

constexpr uint64_t kGroup = 1 << 0, kColl = 1 << 1, kP2p = 1 << 2, kProxyCtrl = 1 << 5,
                   kKernelCh = 1 << 6, kCollApi = 1 << 9, kCeColl = 1 << 12;
constexpr int kKernelChStop = 22;

struct Table {
  const char* name;
  void* init;
  StartFn start;
  StopFn stop;
  StateFn state;
  FinalizeFn finalize;
};

int g_version = 5;
Table g_table;
int g_mask = 0;  // NCCL's process-global activation mask
int g_failures = 0;

void Fail(const char* what) {
  std::fprintf(stderr, "driver: FAILED: %s\n", what);
  ++g_failures;
}

void Check(bool ok, const char* what) {
  if (!ok) Fail(what);
}

void NcclLog(int level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "NCCL %s flags=%lu %s\n", level == 2 ? "WARN" : "INFO", flags, buf);
}

// A zero-filled descriptor, as NCCL builds it on its stack (104 bytes in v4, 112 in v5/v6).
struct Descr {
  alignas(8) unsigned char bytes[112] = {};
  template <typename T>
  void Put(size_t off, T v) {
    std::memcpy(bytes + off, &v, sizeof(v));
  }
  void Header(uint64_t type, void* parent, int rank) {
    if (g_version == 4) {
      Put<uint8_t>(0, static_cast<uint8_t>(type));
    } else {
      Put<uint64_t>(0, type);
    }
    Put<void*>(8, parent);
    Put<int>(16, rank);
  }
};

void* Start(void* ctx, Descr& d) {
  void* handle = reinterpret_cast<void*>(0x1);  // the plugin must overwrite it
  Check(g_table.start(ctx, &handle, d.bytes) == 0, "startEvent returned an error");
  return handle;
}

void* StartGroup(void* ctx) {
  Descr d;
  d.Header(kGroup, nullptr, 0);
  void* h = Start(ctx, d);
  Check(h != nullptr || ctx == nullptr, "Group handle is NULL");
  return h;
}

void* StartColl(void* ctx, void* group, int rank, const plan::CollSpec& c) {
  Descr d;
  // v4: parentObj is the Group. v5+: parentObj is the CollApi event (NULL: not enabled) and
  // parentGroup the Group.
  d.Header(kColl, g_version == 4 ? group : nullptr, rank);
  d.Put<uint64_t>(24, c.seq);
  d.Put<const char*>(32, c.func);
  d.Put<const void*>(40, reinterpret_cast<const void*>(0x7000));
  d.Put<void*>(48, reinterpret_cast<void*>(0x8000));
  d.Put<size_t>(56, c.count);
  d.Put<int>(64, 0);
  d.Put<const char*>(72, c.datatype);
  d.Put<uint8_t>(80, static_cast<uint8_t>(c.channels));
  d.Put<uint8_t>(81, 16);
  d.Put<const char*>(88, c.algo);
  d.Put<const char*>(96, c.proto);
  if (g_version >= 5) d.Put<void*>(104, group);
  return Start(ctx, d);
}

void* StartKernelCh(void* ctx, void* coll, int channel, uint64_t start) {
  Descr d;
  d.Header(kKernelCh, coll, 0);  // rank is 0 for KernelCh
  d.Put<uint8_t>(24, static_cast<uint8_t>(channel));
  d.Put<uint64_t>(32, start);
  return Start(ctx, d);
}

void StopKernelCh(void* handle, uint64_t stop) {
  uint64_t args = stop;  // the state-argument union: kernelCh.pTimer at offset 0
  Check(g_table.state(handle, kKernelChStop, &args) == 0, "recordEventState returned an error");
  Check(g_table.stop(handle) == 0, "stopEvent(KernelCh) returned an error");
}

void* Init(const plan::CommSpec& comm, int n_nodes) {
  void* ctx = nullptr;
  int rc;
  if (g_version == 4) {
    rc = reinterpret_cast<InitV4>(g_table.init)(&ctx, &g_mask, comm.name, comm.comm_id, n_nodes,
                                                comm.nranks, comm.rank, &NcclLog);
  } else {
    rc = reinterpret_cast<InitV5>(g_table.init)(&ctx, comm.comm_id, &g_mask, comm.name, n_nodes,
                                                comm.nranks, comm.rank, &NcclLog);
  }
  Check(rc == 0, "init returned an error");
  Check(ctx != nullptr, "init gave no context");
  std::printf("mask %d\n", g_mask);
  return ctx;
}

void Finalize(void* ctx) { Check(g_table.finalize(ctx) == 0, "finalize returned an error"); }

int64_t Now() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// --- The "profiler thread": KernelCh events after the Coll stop ---------------------------------

struct ChannelWork {
  void* ctx;
  void* coll;
  plan::CollSpec spec;
};

class ProfilerThread {
 public:
  void Push(ChannelWork w) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(w));
    cv_.notify_one();
  }
  void Finish() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
      cv_.notify_one();
    }
    thread_.join();
  }

 private:
  void Loop() {
    for (;;) {
      std::vector<ChannelWork> batch;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return done_ || queue_.size() >= 3; });
        while (!queue_.empty()) {
          batch.push_back(std::move(queue_.front()));
          queue_.pop_front();
        }
        if (batch.empty() && done_) return;
      }
      // Several collectives' channels interleaved, newest collective first, channels in reverse.
      std::vector<std::vector<void*>> handles(batch.size());
      for (size_t b = batch.size(); b-- > 0;) {
        const ChannelWork& w = batch[b];
        for (int ch = w.spec.channels - 1; ch >= 0; --ch) {
          void* h = StartKernelCh(w.ctx, w.coll, ch, w.spec.start[ch]);
          Check(h != nullptr, "KernelCh handle is NULL");
          handles[b].push_back(h);
        }
      }
      for (size_t b = 0; b < batch.size(); ++b) {
        const ChannelWork& w = batch[b];
        for (int k = 0; k < w.spec.channels; ++k) {
          const int ch = w.spec.channels - 1 - k;
          StopKernelCh(handles[b][k], w.spec.stop[ch]);
        }
      }
      // The net-plugin path calls stopEvent(NULL); GroupApi states pass NULL arguments.
      Check(g_table.stop(nullptr) == 0, "stopEvent(NULL)");
      Check(g_table.state(nullptr, kKernelChStop, nullptr) == 0, "recordEventState(NULL)");
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<ChannelWork> queue_;
  bool done_ = false;
  std::thread thread_{[this] { Loop(); }};
};

// --- Modes ---------------------------------------------------------------------------------------

int RunPlan(int rank, int nranks, int collectives) {
  void* ctx[plan::kComms];
  for (int c = 0; c < plan::kComms; ++c) ctx[c] = Init(plan::Comm(c, rank, nranks), nranks / 2);
  Check(g_mask == static_cast<int>(g_version >= 6 ? kColl | kKernelCh | kCeColl : kColl | kKernelCh),
        "activation mask is not Coll|KernelCh (|CeColl from v6 on)");
  ProfilerThread profiler;
  for (int i = 0; i < collectives; ++i) {
    for (int c = 0; c < plan::kComms; ++c) {
      const plan::CommSpec comm = plan::Comm(c, rank, nranks);
      const plan::CollSpec spec = plan::Coll(c, i, rank);
      const int64_t before = Now();
      void* group = StartGroup(ctx[c]);
      void* coll = StartColl(ctx[c], group, comm.rank, spec);
      Check(coll != nullptr, "Coll handle is NULL");
      if (i % 5 == 0) {
        // A send in the same plan: not recorded, and must not disturb the collective.
        Descr d;
        d.Header(kP2p, g_version == 4 ? group : nullptr, comm.rank);
        d.Put<const char*>(24, "Send");
        d.Put<int>(56, (comm.rank + 1) % comm.nranks);
        d.Put<uint8_t>(60, 2);
        void* p2p = Start(ctx[c], d);
        Check(g_table.stop(p2p) == 0, "stopEvent(P2p)");
      }
      Check(g_table.stop(coll) == 0, "stopEvent(Coll)");  // "enqueued", not done
      Check(g_table.stop(group) == 0, "stopEvent(Group)");
      const int64_t after = Now();
      std::printf("enqueue %d %d %lld %lld\n", c, i, static_cast<long long>(before),
                  static_cast<long long>(after));
      profiler.Push({ctx[c], coll, spec});
    }
  }
  profiler.Finish();
  for (int c = 0; c < plan::kComms; ++c) Finalize(ctx[c]);
  return 0;
}

bool WaitForFile(const std::string& path, int seconds) {
  struct stat st;
  for (int i = 0; i < seconds * 100; ++i) {
    if (::stat(path.c_str(), &st) == 0) return true;
    usleep(10000);
  }
  return false;
}

// One AllReduce with 2 channels, all on the calling thread; returns its wall time in ns.
int64_t OneCollective(void* ctx, uint64_t seq) {
  plan::CollSpec spec{};
  spec.func = "AllReduce";
  spec.seq = seq;
  spec.count = 1 << 20;
  spec.datatype = "ncclFloat32";
  spec.algo = "RING";
  spec.proto = "LL128";
  spec.channels = 2;
  const int64_t t0 = Now();
  void* group = StartGroup(ctx);
  void* coll = StartColl(ctx, group, 0, spec);
  g_table.stop(coll);
  g_table.stop(group);
  for (int ch = 0; ch < 2; ++ch) {
    void* h = StartKernelCh(ctx, coll, ch, 1'700'000'000'000'000'000ull + seq * 1000 + ch);
    StopKernelCh(h, 1'700'000'000'000'000'000ull + seq * 1000 + 500 + ch);
  }
  return Now() - t0;
}

int RunCount(int collectives, const std::string& wait_file, bool seccomp) {
  void* ctx = Init(plan::Comm(0, 0, 1), 1);
  int64_t wall = 0, worst = 0;
  uint64_t trapped = 0;
  long last = -1;
  bool armed = false;
  std::thread worker([&] {
    if (seccomp) armed = ringside::testing::SyscallTrap::Arm();
    const int64_t t0 = Now();
    for (int i = 0; i < collectives; ++i) {
      const int64_t t = OneCollective(ctx, static_cast<uint64_t>(i));
      if (t > worst) worst = t;
    }
    wall = Now() - t0;
    if (armed) {
      trapped = ringside::testing::SyscallTrap::Disarm();
      last = ringside::testing::SyscallTrap::last_syscall();
    }
  });
  worker.join();
  std::printf("count %d %lld %lld\n", collectives, static_cast<long long>(wall),
              static_cast<long long>(worst));
  if (seccomp) {
    if (armed) {
      std::printf("syscalls %llu %ld\n", static_cast<unsigned long long>(trapped), last);
    } else {
      std::printf("syscalls unavailable\n");
    }
  }
  std::fflush(stdout);
  std::fprintf(stderr, "driver: phase 1 done\n");
  if (!wait_file.empty()) Check(WaitForFile(wait_file, 60), "the wait file never appeared");
  OneCollective(ctx, static_cast<uint64_t>(collectives));
  Finalize(ctx);
  return 0;
}

int RunFork() {
  void* ctx = Init(plan::Comm(0, 0, 2), 1);
  for (int i = 0; i < 10; ++i) OneCollective(ctx, static_cast<uint64_t>(i));
  std::fflush(stdout);
  const pid_t child = fork();
  if (child == 0) {
    // The inherited communicator: the first completed record restarts the sender lazily.
    for (int i = 100; i < 105; ++i) OneCollective(ctx, static_cast<uint64_t>(i));
    // A communicator of the child's own.
    plan::CommSpec own = {0x6363000000000001ull, "child", 1, 0};
    void* child_ctx = Init(own, 1);
    for (int i = 200; i < 205; ++i) OneCollective(child_ctx, static_cast<uint64_t>(i));
    Finalize(child_ctx);
    Finalize(ctx);
    std::fflush(stdout);
    _exit(g_failures == 0 ? 0 : 1);
  }
  std::printf("child-pid %d\n", static_cast<int>(child));
  for (int i = 10; i < 20; ++i) OneCollective(ctx, static_cast<uint64_t>(i));
  int status = 0;
  waitpid(child, &status, 0);
  Check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the fork child failed");
  Finalize(ctx);
  return 0;
}

int RunWeird() {
  // An init NCCL should never send: rank outside the communicator. The plugin declines quietly.
  plan::CommSpec bad = {1, "bad", 4, 9};
  void* none = reinterpret_cast<void*>(0x1);
  int rc =
      g_version == 4
          ? reinterpret_cast<InitV4>(g_table.init)(&none, &g_mask, bad.name, 1, 1, 4, 9, &NcclLog)
          : reinterpret_cast<InitV5>(g_table.init)(&none, 1, &g_mask, bad.name, 1, 4, 9, &NcclLog);
  Check(rc == 0 && none == nullptr, "a bad init must succeed with a NULL context");
  // With a NULL context, NCCL still calls startEvent and expects a NULL handle.
  Descr d;
  d.Header(kColl, nullptr, 0);
  Check(Start(nullptr, d) == nullptr, "startEvent(NULL context) must give a NULL handle");

  void* ctx = Init(plan::Comm(0, 1, 4), 2);
  // NULL strings, a count that overflows, zero channels, an unknown datatype.
  plan::CollSpec c{};
  c.func = nullptr;
  c.seq = 1;
  c.count = ~size_t{0} / 2;
  c.datatype = "ncclMystery";
  c.channels = 0;
  void* coll = StartColl(ctx, StartGroup(ctx), 1, c);
  g_table.stop(coll);
  // A control character and invalid UTF-8 in the strings; a KernelCh without a stop state; a
  // KernelCh with a zero timer; one KernelCh more than announced.
  c.func = "All\nReduce\xff";
  c.seq = 2;
  c.count = 10;
  c.datatype = "ncclFloat16";
  c.algo = "RING\t";
  c.proto = nullptr;
  c.channels = 2;
  coll = StartColl(ctx, nullptr, 1, c);
  g_table.stop(coll);
  void* k0 = StartKernelCh(ctx, coll, 0, 0);
  void* k1 = StartKernelCh(ctx, coll, 1, 1'700'000'000'000'000'000ull);
  void* extra = StartKernelCh(ctx, coll, 2, 1'700'000'000'000'000'000ull);
  Check(extra == nullptr, "a KernelCh beyond nChannels must get a NULL handle");
  g_table.stop(k0);                                    // no state 22 before its stop
  StopKernelCh(k1, 1'700'000'000'000'000'000ull - 5);  // stop before start: no kernel times
  // Events the plugin does not record get NULL handles; ProxyCtrl and CollApi included.
  for (uint64_t type : {kP2p, kProxyCtrl, kCollApi, uint64_t{1} << 15}) {
    Descr e;
    e.Header(type, nullptr, 0);
    void* h = Start(ctx, e);
    Check(h == nullptr, "an unrecorded event type got a handle");
    g_table.stop(h);
  }
  Check(g_table.start(ctx, nullptr, d.bytes) == 0, "startEvent with a NULL handle pointer");
  Finalize(ctx);
  return 0;
}

// A v6 copy-engine collective (ncclProfileCeColl), laid out from the reference's v6 offsets; NCCL
// starts it before enqueuing the copies and stops it after. It has no KernelCh children. Prints the
// handle it got ("ce_handle 0|1").
int RunCopyEngine() {
  void* ctx = Init(plan::Comm(0, 2, 4), 1);
  Descr d;
  d.Header(kCeColl, nullptr, 2);
  d.Put<uint64_t>(24, 7);                      // seqNumber
  d.Put<const char*>(32, "AllGather");         // func
  d.Put<size_t>(56, 1000);                     // count
  d.Put<int>(64, 0);                           // root
  d.Put<const char*>(72, "ncclFloat32");       // datatype
  d.Put<const char*>(80, "MC");                // syncStrategy
  d.Put<uint32_t>(100, 7);                     // ceSeqNum
  d.Put<void*>(104, reinterpret_cast<void*>(0x5));  // stream
  void* h = Start(ctx, d);
  std::printf("ce_handle %d\n", h != nullptr ? 1 : 0);
  g_table.stop(h);
  Finalize(ctx);
  return 0;
}

int RunStraggler(int first_rank, int gpus, int nranks, int collectives, int late, int64_t t0) {
  using SetDeviceFn = int (*)(int);
  const auto set_device = reinterpret_cast<SetDeviceFn>(dlsym(RTLD_DEFAULT, "cudaSetDevice"));
  if (gpus > 1 && set_device == nullptr) {
    std::fprintf(stderr,
                 "driver: --gpus needs a CUDA runtime with cudaSetDevice (--preload-global)\n");
    return 2;
  }
  std::vector<void*> ctxs(static_cast<size_t>(gpus), nullptr);
  for (int g = 0; g < gpus; ++g) {
    std::thread init([&, g] {
      if (gpus > 1) Check(set_device(g) == 0, "cudaSetDevice");
      const plan::CommSpec comm = {0x7171000000000001ull, "world", nranks, first_rank + g};
      ctxs[static_cast<size_t>(g)] = Init(comm, nranks);
    });
    init.join();
  }
  for (int i = 0; i < collectives; ++i) {
    for (int g = 0; g < gpus; ++g) {
      void* ctx = ctxs[static_cast<size_t>(g)];
      const int rank = first_rank + g;
      plan::CollSpec spec{};
      spec.func = "AllReduce";
      spec.seq = static_cast<uint64_t>(i);
      spec.count = 1 << 20;
      spec.datatype = "ncclFloat32";
      spec.algo = "RING";
      spec.proto = "SIMPLE";
      spec.channels = 1;
      const uint64_t step = static_cast<uint64_t>(t0) + static_cast<uint64_t>(i) * 10'000'000ull;
      const uint64_t start =
          rank == late ? step + 4'000'000ull : step + static_cast<uint64_t>(rank) * 10'000ull;
      void* group = StartGroup(ctx);
      void* coll = StartColl(ctx, group, rank, spec);
      Check(g_table.stop(coll) == 0, "stopEvent(Coll)");
      Check(g_table.stop(group) == 0, "stopEvent(Group)");
      void* h = StartKernelCh(ctx, coll, 0, start);
      StopKernelCh(h, step + 5'000'000ull);
    }
  }
  for (void* ctx : ctxs) Finalize(ctx);
  return 0;
}

std::string Flag(int argc, char** argv, const char* name, const char* fallback = "") {
  const size_t n = std::strlen(name);
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], name, n) == 0 && argv[i][n] == '=') return argv[i] + n + 1;
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  // A clean environment for the job id and the pod: only what --env sets.
  for (const char* name :
       {"RINGSIDE_JOB_ID", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "RINGSIDE_SOCKET", "POD_NAME",
        "POD_NAMESPACE"}) {
    unsetenv(name);
  }
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--env=", 6) == 0) {
      std::string kv = argv[i] + 6;
      const size_t eq = kv.find('=');
      if (eq != std::string::npos) setenv(kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str(), 1);
    }
  }
  const std::string socket = Flag(argc, argv, "--socket");
  if (!socket.empty()) setenv("RINGSIDE_SOCKET", socket.c_str(), 1);
  g_version = std::atoi(Flag(argc, argv, "--version", "5").c_str());
  const std::string mode = Flag(argc, argv, "--mode", "plan");
  const int rank = std::atoi(Flag(argc, argv, "--rank", "0").c_str());
  const int nranks = std::atoi(Flag(argc, argv, "--nranks", "1").c_str());
  const int collectives = std::atoi(Flag(argc, argv, "--collectives", "10").c_str());
  bool seccomp = false;
  for (int i = 1; i < argc; ++i) seccomp |= std::strcmp(argv[i], "--seccomp") == 0;
  if (seccomp) ringside::testing::SyscallTrap::InstallHandler();
  setvbuf(stdout, nullptr, _IOLBF, 0);

  // Libraries the "application" loaded before NCCL (a fake CUDA runtime or driver):
  // --preload-local=PATH as a Python extension's dependency would be (RTLD_LOCAL),
  // --preload-global=PATH into the global scope.
  for (const char* flag : {"--preload-local", "--preload-global"}) {
    const std::string pre = Flag(argc, argv, flag);
    if (pre.empty()) continue;
    const int scope = std::strcmp(flag, "--preload-global") == 0 ? RTLD_GLOBAL : RTLD_LOCAL;
    if (dlopen(pre.c_str(), RTLD_NOW | scope) == nullptr) {
      std::fprintf(stderr, "driver: dlopen %s: %s\n", pre.c_str(), dlerror());
      return 2;
    }
  }
  const std::string path = Flag(argc, argv, "--plugin");
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "driver: dlopen %s: %s\n", path.c_str(), dlerror());
    return 2;
  }
  const std::string symbol = "ncclProfiler_v" + std::to_string(g_version);
  void* table = dlsym(lib, symbol.c_str());
  if (table == nullptr) {
    std::fprintf(stderr, "driver: dlsym %s: %s\n", symbol.c_str(), dlerror());
    return 2;
  }
  std::memcpy(&g_table, table, sizeof(g_table));  // 6 pointers, 48 bytes
  std::printf("pid %d\n", static_cast<int>(getpid()));
  std::printf("name %s\n", g_table.name);

  int rc = 0;
  if (mode == "plan") {
    rc = RunPlan(rank, nranks, collectives);
  } else if (mode == "count") {
    rc = RunCount(collectives, Flag(argc, argv, "--wait-file"), seccomp);
  } else if (mode == "fork") {
    rc = RunFork();
  } else if (mode == "ce") {
    rc = RunCopyEngine();
  } else if (mode == "weird") {
    rc = RunWeird();
  } else if (mode == "straggler") {
    rc = RunStraggler(rank, std::max(1, std::atoi(Flag(argc, argv, "--gpus", "1").c_str())),
                      nranks, collectives,
                      std::atoi(Flag(argc, argv, "--late-rank", "0").c_str()),
                      std::atoll(Flag(argc, argv, "--t0", "0").c_str()));
  } else {
    std::fprintf(stderr, "driver: unknown --mode=%s\n", mode.c_str());
    return 2;
  }
  dlclose(lib);  // NCCL closes the plugin after its last communicator
  std::printf("done\n");
  return rc != 0 || g_failures != 0 ? 1 : 0;
}
