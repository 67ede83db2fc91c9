// A stand-in for the one call the NCCL plugin makes into an already-loaded CUDA library, built
// twice: as libcudart.so.12 (cudaGetDevice) and as libcuda.so.1 (cuCtxGetDevice). The device it
// reports is FAKE_CUDA_DEVICE (as cudaSetDevice would have made it current); unset, it fails the
// way CUDA does with no device (a non-zero error), so the plugin must fall back.
#include <cstdlib>

namespace {
int Answer(int* device) {
  const char* v = std::getenv("FAKE_CUDA_DEVICE");
  if (device == nullptr || v == nullptr || v[0] == '\0') return 100;  // cudaErrorNoDevice
  *device = std::atoi(v);
  return 0;
}
}  // namespace

extern "C" {
#ifdef FAKE_CUDA_RUNTIME
__attribute__((visibility("default"))) int cudaGetDevice(int* device) { return Answer(device); }
#else
__attribute__((visibility("default"))) int cuCtxGetDevice(int* device) { return Answer(device); }
#endif
}
