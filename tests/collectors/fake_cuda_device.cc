// A stand-in for the one call the NCCL plugin makes into an already-loaded CUDA library, built
// twice: as libcudart.so.12 (cudaGetDevice) and as libcuda.so.1 (cuCtxGetDevice). The device it
// reports is the calling thread's, as cudaSetDevice (runtime build only) made it current, else
// FAKE_CUDA_DEVICE; with neither it fails the way CUDA does with no device (a non-zero error), so
// the plugin must fall back. One process may drive several GPUs: each thread its own device.
#include <cstdio>
#include <cstdlib>

namespace {
thread_local int current_device = -1;  // set by cudaSetDevice on this thread

int Answer(int* device) {
  if (device == nullptr) return 1;  // cudaErrorInvalidValue
  if (current_device >= 0) {
    *device = current_device;
    return 0;
  }
  const char* v = std::getenv("FAKE_CUDA_DEVICE");
  if (v == nullptr || v[0] == '\0') return 100;  // cudaErrorNoDevice
  *device = std::atoi(v);
  return 0;
}
// CUDA's spelling of device `device`'s PCI address: "0000:1<D>:00.0", uppercase hex.
int BusId(char* out, int len, int device) {
  if (out == nullptr || len < 13 || device < 0) return 1;
  std::snprintf(out, static_cast<size_t>(len), "0000:%02X:00.0", 0x10 + device);
  return 0;
}
}  // namespace

extern "C" {
#ifdef FAKE_CUDA_RUNTIME
__attribute__((visibility("default"))) int cudaGetDevice(int* device) { return Answer(device); }
__attribute__((visibility("default"))) int cudaDeviceGetPCIBusId(char* out, int len, int device) {
  return BusId(out, len, device);
}
__attribute__((visibility("default"))) int cudaSetDevice(int device) {
  if (device < 0) return 101;  // cudaErrorInvalidDevice
  current_device = device;
  return 0;
}
#else
__attribute__((visibility("default"))) int cuCtxGetDevice(int* device) { return Answer(device); }
__attribute__((visibility("default"))) int cuDeviceGetPCIBusId(char* out, int len, int device) {
  return BusId(out, len, device);
}
#endif
}
