// The CUDA device of the calling thread, learned from the CUDA runtime or driver the process has
// already loaded: the plugin never links or loads CUDA itself.
#ifndef RINGSIDE_COLLECTORS_NCCL_PLUGIN_CUDA_DEVICE_H_
#define RINGSIDE_COLLECTORS_NCCL_PLUGIN_CUDA_DEVICE_H_

namespace ringside::collectors {

// Where CurrentCudaDevice found its answer.
enum class CudaDeviceSource {
  kNone,     // no CUDA runtime or driver loaded, or every call failed: the device is -1
  kRuntime,  // cudaGetDevice of an already-loaded libcudart
  kDriver,   // cuCtxGetDevice of an already-loaded libcuda (the thread's current context)
};

struct CudaDevice {
  int ordinal = -1;  // as CUDA numbers it in this process (after CUDA_VISIBLE_DEVICES)
  CudaDeviceSource source = CudaDeviceSource::kNone;
};

// The device current on the calling thread. NCCL calls the profiler's init on a thread that has
// just made the communicator's device current (cudaSetDevice), so at init this is the
// communicator's GPU. Looks, in order, for
//   - cudaGetDevice in the global scope (RTLD_DEFAULT: the executable, its dependencies and
//     libraries loaded RTLD_GLOBAL);
//   - cudaGetDevice in a libcudart already loaded RTLD_LOCAL (as Python extensions load it),
//     reached by soname with RTLD_NOLOAD (libcudart.so.13, .12, .11.0, libcudart.so);
//   - cuCtxGetDevice in an already-loaded libcuda.so.1 (NCCL's own libcudart is often static,
//     but the driver library is always a shared one).
// Takes the dynamic loader's lock: call it at init, never on the hot path.
CudaDevice CurrentCudaDevice() noexcept;

const char* CudaDeviceSourceName(CudaDeviceSource source) noexcept;

// The PCI address of CUDA device `ordinal` as the already-loaded CUDA library reports it
// (cudaDeviceGetPCIBusId, else cuDeviceGetPCIBusId, looked up as CurrentCudaDevice does), in
// `out[size]` ("0000:19:00.0": CUDA's spelling; normalise with collectors/common/pci_bus_id.h).
// False (and "") when no CUDA library answers. Takes the loader's lock: at init only.
bool CudaPciBusId(int ordinal, char* out, int size) noexcept;

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_NCCL_PLUGIN_CUDA_DEVICE_H_
