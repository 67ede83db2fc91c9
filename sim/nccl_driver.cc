#include "sim/nccl_driver.h"

#include <dlfcn.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace ringside::sim {
namespace {

using Logger = void (*)(int, unsigned long, const char*, int, const char*, ...);
using InitV5 = int (*)(void**, uint64_t, int*, const char*, int, int, int, Logger);
using StartFn = int (*)(void*, void**, void*);
using StopFn = int (*)(void*);
using StateFn = int (*)(void*, int, void*);
using FinalizeFn = int (*)(void*);

constexpr uint64_t kGroup = 1 << 0, kColl = 1 << 1, kKernelCh = 1 << 6;
constexpr int kKernelChStop = 22;

void QuietLog(int, unsigned long, const char*, int, const char*, ...) {}

// A zero-filled v5 descriptor (112 bytes), as NCCL builds it on its stack.
struct Descr {
  alignas(8) unsigned char bytes[136] = {};
  template <typename T>
  void Put(size_t off, T v) {
    std::memcpy(bytes + off, &v, sizeof(v));
  }
  void Header(uint64_t type, void* parent, int rank) {
    Put<uint64_t>(0, type);
    Put<void*>(8, parent);
    Put<int>(16, rank);
  }
};

}  // namespace

struct NcclDriver::Table {
  const char* name;
  void* init;
  StartFn start;
  StopFn stop;
  StateFn state;
  FinalizeFn finalize;
};

absl::StatusOr<std::unique_ptr<NcclDriver>> NcclDriver::Load(const std::string& plugin_path) {
  void* lib = dlopen(plugin_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    return absl::NotFoundError(absl::StrCat("dlopen ", plugin_path, ": ", dlerror()));
  }
  void* table = dlsym(lib, "ncclProfiler_v5");
  if (table == nullptr) {
    dlclose(lib);
    return absl::NotFoundError(absl::StrCat(plugin_path, " has no ncclProfiler_v5"));
  }
  std::unique_ptr<NcclDriver> d(new NcclDriver());
  d->lib_ = lib;
  d->table_ = std::make_unique<Table>();
  std::memcpy(d->table_.get(), table, sizeof(Table));  // 6 pointers
  return d;
}

NcclDriver::~NcclDriver() {
  if (lib_ != nullptr) dlclose(lib_);
}

void* NcclDriver::Init(uint64_t comm_id, const char* comm_name, int nranks, int rank,
                       int n_nodes) {
  void* ctx = nullptr;
  // NCCL's process-global activation mask: the plugin keeps the pointer and reads it later.
  const int rc = reinterpret_cast<InitV5>(table_->init)(&ctx, comm_id, &mask_, comm_name, n_nodes,
                                                        nranks, rank, &QuietLog);
  return rc == 0 ? ctx : nullptr;
}

void NcclDriver::Collective(void* ctx, int rank, const SimCollective& c) {
  if (ctx == nullptr) return;
  Descr g;
  g.Header(kGroup, nullptr, 0);
  void* group = nullptr;
  table_->start(ctx, &group, g.bytes);
  Descr d;
  d.Header(kColl, nullptr, rank);  // v5: parentObj is the CollApi event (not enabled)
  d.Put<uint64_t>(24, c.seq);
  d.Put<const char*>(32, c.function);
  d.Put<const void*>(40, reinterpret_cast<const void*>(0x7000));
  d.Put<void*>(48, reinterpret_cast<void*>(0x8000));
  d.Put<size_t>(56, c.count);
  d.Put<int>(64, 0);
  d.Put<const char*>(72, c.datatype);
  d.Put<uint8_t>(80, static_cast<uint8_t>(c.channels));
  d.Put<uint8_t>(81, 16);
  d.Put<const char*>(88, c.algo);
  d.Put<const char*>(96, c.proto);
  d.Put<void*>(104, group);
  void* coll = nullptr;
  table_->start(ctx, &coll, d.bytes);
  table_->stop(coll);   // enqueued
  table_->stop(group);
  if (coll == nullptr) return;
  // The proxy thread's view: each channel's GPU start and stop (channel 0 spans the kernel).
  for (int ch = 0; ch < c.channels; ++ch) {
    Descr k;
    k.Header(kKernelCh, coll, 0);
    k.Put<uint8_t>(24, static_cast<uint8_t>(ch));
    k.Put<uint64_t>(32, c.kernel_start_ns + static_cast<uint64_t>(ch) * 64);
    void* h = nullptr;
    table_->start(ctx, &h, k.bytes);
    uint64_t stop = c.kernel_stop_ns - static_cast<uint64_t>(ch) * 96;
    table_->state(h, kKernelChStop, &stop);
    table_->stop(h);
  }
}

void NcclDriver::Finalize(void* ctx) {
  if (ctx != nullptr) table_->finalize(ctx);
}

}  // namespace ringside::sim
