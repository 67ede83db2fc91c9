#include "collectors/nccl_plugin/cuda_device.h"

#include <dlfcn.h>

namespace ringside::collectors {
namespace {

// cudaError_t cudaGetDevice(int*) and CUresult cuCtxGetDevice(CUdevice*): both int-sized enums
// with 0 for success; CUdevice is an int ordinal.
using GetDeviceFn = int (*)(int* device);

constexpr const char* kRuntimeSonames[] = {"libcudart.so.13", "libcudart.so.12",
                                           "libcudart.so.11.0", "libcudart.so"};
constexpr char kDriverSoname[] = "libcuda.so.1";

bool Ask(GetDeviceFn fn, int* device) noexcept {
  int d = -1;
  if (fn == nullptr || fn(&d) != 0 || d < 0) return false;
  *device = d;
  return true;
}

// dlsym in a library that is already loaded (RTLD_NOLOAD never loads one), then let it go.
bool AskLoaded(const char* soname, const char* symbol, int* device) noexcept {
  void* lib = ::dlopen(soname, RTLD_LAZY | RTLD_NOLOAD);
  if (lib == nullptr) return false;
  const bool ok = Ask(reinterpret_cast<GetDeviceFn>(::dlsym(lib, symbol)), device);
  ::dlclose(lib);  // drops the reference RTLD_NOLOAD took; the library stays loaded
  return ok;
}

// cudaError_t cudaDeviceGetPCIBusId(char*, int len, int device) and CUresult
// cuDeviceGetPCIBusId(char*, int len, CUdevice): the same shape.
using GetPciBusIdFn = int (*)(char* out, int len, int device);

bool AskBusId(GetPciBusIdFn fn, int ordinal, char* out, int size) noexcept {
  if (fn == nullptr || size <= 1) return false;
  out[0] = '\0';
  if (fn(out, size, ordinal) != 0) {
    out[0] = '\0';
    return false;
  }
  out[size - 1] = '\0';
  return out[0] != '\0';
}

bool AskLoadedBusId(const char* soname, const char* symbol, int ordinal, char* out,
                    int size) noexcept {
  void* lib = ::dlopen(soname, RTLD_LAZY | RTLD_NOLOAD);
  if (lib == nullptr) return false;
  const bool ok =
      AskBusId(reinterpret_cast<GetPciBusIdFn>(::dlsym(lib, symbol)), ordinal, out, size);
  ::dlclose(lib);
  return ok;
}

}  // namespace

bool CudaPciBusId(int ordinal, char* out, int size) noexcept {
  if (out == nullptr || size <= 0) return false;
  out[0] = '\0';
  if (ordinal < 0) return false;
  if (AskBusId(reinterpret_cast<GetPciBusIdFn>(::dlsym(RTLD_DEFAULT, "cudaDeviceGetPCIBusId")),
               ordinal, out, size)) {
    return true;
  }
  for (const char* soname : kRuntimeSonames) {
    if (AskLoadedBusId(soname, "cudaDeviceGetPCIBusId", ordinal, out, size)) return true;
  }
  return AskLoadedBusId(kDriverSoname, "cuDeviceGetPCIBusId", ordinal, out, size);
}

CudaDevice CurrentCudaDevice() noexcept {
  CudaDevice out;
  if (Ask(reinterpret_cast<GetDeviceFn>(::dlsym(RTLD_DEFAULT, "cudaGetDevice")), &out.ordinal)) {
    out.source = CudaDeviceSource::kRuntime;
    return out;
  }
  for (const char* soname : kRuntimeSonames) {
    if (AskLoaded(soname, "cudaGetDevice", &out.ordinal)) {
      out.source = CudaDeviceSource::kRuntime;
      return out;
    }
  }
  if (AskLoaded(kDriverSoname, "cuCtxGetDevice", &out.ordinal)) {
    out.source = CudaDeviceSource::kDriver;
    return out;
  }
  out.ordinal = -1;
  return out;
}

const char* CudaDeviceSourceName(CudaDeviceSource source) noexcept {
  switch (source) {
    case CudaDeviceSource::kRuntime:
      return "cudaGetDevice";
    case CudaDeviceSource::kDriver:
      return "cuCtxGetDevice";
    case CudaDeviceSource::kNone:
      break;
  }
  return "none";
}

}  // namespace ringside::collectors
