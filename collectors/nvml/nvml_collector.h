// Reads NVLink state and error counters of every GPU through NVML, loaded at run time with dlopen.
//
// Series (source "nvlink", device = NVML GPU index, port = link index):
//   link_state                       STATE   1 up, 0 down; a down link stays in the table
//   replay_errors, recovery_errors,  COUNTER 64-bit, pre-Blackwell DL counters
//   crc_flit_errors, crc_data_errors
//   recovery_events, recovery_successful_events, recovery_failed_events, symbol_errors,
//   effective_errors                 COUNTER 64-bit, NVLink5 field values where the DL call answers
//                                    NOT_SUPPORTED (Blackwell and later)
//   effective_ber, symbol_ber        GAUGE   packed BER (Unit::kPackedBer, see DecodeNvlinkBer)
// plus one InfoRecord per GPU (source "gpu": uuid, name, pci_bus_id, architecture, driver_version,
// nvlink_count, nvlink_error_api).
//
// Without a usable NVML the collector is off for the life of the process: its table is empty and
// status() says why, once, for the agent to log and export.
#ifndef RINGSIDE_COLLECTORS_NVML_NVML_COLLECTOR_H_
#define RINGSIDE_COLLECTORS_NVML_NVML_COLLECTOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "collectors/common/collector.h"
#include "collectors/nvml/nvml_api.h"

namespace ringside::collectors {

struct NvmlOptions {
  // A file name searched like the dynamic linker does, or a path (tests give the fake's).
  std::string library = nvml::kDefaultLibrary;
  // GPUs and links are probed again at this interval; a change in the GPU count or a lost GPU
  // triggers discovery at the next cycle.
  absl::Duration rediscover_interval = absl::Seconds(30);
};

class NvmlCollector final : public Collector {
 public:
  // Loads and initialises NVML; see status().
  explicit NvmlCollector(NvmlOptions options);
  ~NvmlCollector() override;

  absl::string_view name() const override { return "nvml"; }
  void Collect(absl::Time now, CollectorSnapshot& out, CycleErrors& errors) override;

  // OK when NVML is loaded and initialised. Otherwise why the collector is off: NotFound (the
  // library cannot be opened: no NVIDIA driver), Unimplemented (a required entry point is
  // missing; the message names it), or the code of the failed nvmlInit_v2.
  const absl::Status& status() const { return status_; }
  absl::Status Availability() const override { return status_; }
  bool enabled() const { return lib_ != nullptr; }

 private:
  enum class ReadKind : uint8_t { kLinkState, kLegacyCounter, kField };
  struct Read {
    ReadKind kind;
    uint32_t gpu;  // index into gpus_
    uint32_t link;
    int id;         // NvLinkErrorCounter or field id
    uint32_t slot;  // kField: index into the GPU's batch
  };
  struct Gpu {
    nvml::Device handle;
    unsigned int index;
    std::vector<nvml::FieldValue> batch;  // one GetFieldValues call per cycle
  };

  void Discover(absl::Time now, unsigned int count, CycleErrors& errors);
  void ReadBatches();
  // Fills `v` for a failed call: unavailable for NOT_SUPPORTED or a down link, else an error.
  void Fail(Value& v, nvml::Return r, bool link_down, const Read& read, CycleErrors& errors);

  NvmlOptions options_;
  absl::Status status_;
  std::unique_ptr<nvml::NvmlLibrary> lib_;
  std::string driver_version_;
  std::shared_ptr<const SeriesTable> table_;
  std::vector<Gpu> gpus_;
  std::vector<Read> reads_;  // parallel to table_->defs
  unsigned int discovered_count_ = 0;
  absl::Time last_discovery_ = absl::InfinitePast();
  bool rediscover_ = true;
};

// The bit-error rate a packed NVML BER value (fields 220, 222) stands for: mantissa x
// 10^-exponent; 0 for the "zero BER" encoding (mantissa 15, exponent 255).
double DecodeNvlinkBer(uint64_t packed);

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_NVML_NVML_COLLECTOR_H_
