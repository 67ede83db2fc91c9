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
// plus one InfoRecord per GPU (source "gpu": uuid, name, pci_bus_id (NVML's spelling),
// pci_bus_id_sysfs (the Linux form, collectors/common/pci_bus_id.h), architecture, driver_version,
// nvlink_count, nvlink_error_api, clocks_event_reasons_api), and one per GPU with compute
// processes (source "gpu_processes": pids, comma-separated, ascending).
//
// The GPU's own health and speed signals (source "gpu": clock event reasons, clocks, temperature,
// power, throttle-time counters, ECC, row remapping, PCIe, compute processes, XIDs) are listed in
// gpu_signals.h; XID events come from xid_events.h, waited for by a thread of the agent.
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
#include "collectors/nvml/gpu_signals.h"
#include "collectors/nvml/nvml_api.h"
#include "collectors/nvml/xid_events.h"

namespace ringside::collectors {

struct NvmlOptions {
  // A file name searched like the dynamic linker does, or a path (tests give the fake's).
  std::string library = nvml::kDefaultLibrary;
  // GPUs and links are probed again at this interval; a change in the GPU count or a lost GPU
  // triggers discovery at the next cycle.
  absl::Duration rediscover_interval = absl::Seconds(30);
  // The GPU signals whose NVML calls cost more (throttle-time field values ~1.2 ms per GPU on an
  // H200, ECC, row remapping, PCIe replay, compute processes: gpu-causes.md §1.8) are read at this
  // interval; the cheap ones every cycle. Zero: every cycle.
  absl::Duration slow_interval = absl::Seconds(10);
  // Watch XID events through an NVML event set (needs a thread of the caller's: xid_events()).
  bool xid_events = true;
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
  // The XID event source, for the agent's waiting thread; null without NVML, without the event
  // API, or with NvmlOptions::xid_events off. Owned by the collector.
  XidEvents* xid_events() const { return xid_.get(); }

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
    GpuSignals signals;
    size_t offset = 0;  // of its first "gpu" series in the table
  };

  void Discover(absl::Time now, unsigned int count, CycleErrors& errors);
  void ReadBatches();
  // After a slow read: the "gpu_processes" info records follow the pids (a new table when they
  // changed).
  void UpdateProcessInfo();
  // Fills `v` for a failed call: unavailable for NOT_SUPPORTED or a down link, else an error.
  void Fail(Value& v, nvml::Return r, bool link_down, const Read& read, CycleErrors& errors);

  NvmlOptions options_;
  absl::Status status_;
  std::shared_ptr<nvml::NvmlLibrary> lib_;
  std::unique_ptr<XidEvents> xid_;
  std::string driver_version_;
  bool new_throttle_ids_ = true;
  absl::Time last_slow_ = absl::InfinitePast();
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
