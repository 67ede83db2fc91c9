// ringside-agent: reads the node's InfiniBand/RoCE and netdev counters every --interval and serves
// them on /metrics. Flags are parsed here only and turned into option structs.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "collectors/ethtool/ethtool_collector.h"
#include "collectors/host/host_collector.h"
#include "collectors/ibmad/ib_discovery_collector.h"
#include "collectors/ibmad/ibmad_collector.h"
#include "collectors/ibmad/scan_targets.h"
#include "collectors/infiniband/infiniband_collector.h"
#include "collectors/lldp/lldp_collector.h"
#include "collectors/netdev/netdev_collector.h"
#include "collectors/nvml/nvml_collector.h"
#include "daemon/agent/agent_health.h"
#include "daemon/agent/clock_bound.h"
#include "daemon/agent/collective_listener.h"
#include "daemon/agent/collective_metrics.h"
#include "daemon/agent/exposition.h"
#include "daemon/agent/link_events.h"
#include "daemon/agent/render.h"
#include "daemon/agent/sampler.h"
#include "daemon/agent/shard_placement.h"
#include "daemon/agent/upload_fanout.h"
#include "daemon/agent/uploader.h"
#include "daemon/agent/xid_reader.h"
#include "daemon/common/flags.h"
#include "daemon/common/http_server.h"
#include "daemon/common/tls.h"
#include "daemon/common/log.h"
#include "daemon/common/shard_files.h"
#include "daemon/common/signals.h"
#include "daemon/common/socket_activation.h"
#include "daemon/common/systemd_notify.h"
#include "prometheus/text_serializer.h"

ABSL_FLAG(std::string, sysfs_root, "/sys", "Folder that stands for /sys.");
ABSL_FLAG(std::string, procfs_root, "/proc", "Folder that stands for /proc.");
ABSL_FLAG(absl::Duration, interval, absl::Seconds(1), "Sampling interval (e.g. 1s, 100ms, 10ms).");
ABSL_FLAG(std::string, web_config_file, "",
          "exporter-toolkit web configuration for --listen (also spelled --web.config.file): "
          "TLS, client certificates, bcrypt basic_auth_users, headers; re-read when it or the "
          "files it names change. Empty: plaintext, no authentication. /healthz and /readyz stay "
          "open for probes (docs/http-security.md).");
ABSL_FLAG(std::string, listen, ":9471",
          "Address of /metrics, /healthz and /readyz, [host]:port; empty to serve none.");
ABSL_FLAG(std::string, node_name, "", "This node's name in every series (default: host name).");
ABSL_FLAG(bool, once, false, "Print one snapshot and exit.");
ABSL_FLAG(std::string, o, "text", "Output of --once: text or json.");
ABSL_FLAG(bool, print_rates, false, "Print per-second rates of moving counters every interval.");
ABSL_FLAG(int, rates_top, 40, "With --print-rates: how many of the fastest counters to show.");
ABSL_FLAG(absl::Duration, duration, absl::InfiniteDuration(),
          "Stop after this long (default: until SIGINT/SIGTERM).");
ABSL_FLAG(std::string, nvml_library, "libnvidia-ml.so.1",
          "The NVML library to load for NVLink state and errors; empty to leave NVLink off.");
ABSL_FLAG(absl::Duration, nvml_slow_interval, absl::Seconds(10),
          "Read the GPU signals whose NVML calls cost more (throttle-time counters ~1.2 ms per GPU "
          "on an H200, ECC, row remapping, PCIe replays, compute processes) at this interval; the "
          "cheap ones (clock event reasons, clocks, temperature, power, utilisation, PCIe link) "
          "every --interval. 0: every interval.");
ABSL_FLAG(bool, nvml_xid_events, true,
          "Watch every GPU's XID events (an NVML event set on a thread of its own); each is "
          "streamed to the aggregator at once.");
ABSL_FLAG(bool, host_signals, true,
          "Read the node's pressure stall information (<procfs-root>/pressure/{cpu,memory,io}) and "
          "the CPU throttling (cpu.stat under <sysfs-root>/fs/cgroup) of the cgroups the NCCL "
          "plugins on this node report.");
ABSL_FLAG(absl::Duration, cgroup_forget_after, absl::Minutes(2),
          "With --host-signals, stop reading a rank's cgroup this long after its last collective "
          "record.");
ABSL_FLAG(std::string, ethtool_source, "ioctl",
          "Where driver statistics come from: ioctl (SIOCETHTOOL), dir:PATH (`ethtool -S` dumps, "
          "one file per interface), or off.");
ABSL_FLAG(bool, ethtool_all_metrics, false,
          "Export every driver statistic on /metrics, not only the catalog's (mlx5 has thousands).");
ABSL_FLAG(bool, link_events, true,
          "Watch netlink (and libibverbs, where it finds devices) for link transitions.");
ABSL_FLAG(absl::Duration, link_state_interval, absl::Milliseconds(100),
          "With --link_events, also read each InfiniBand/RoCE port's state attribute this often "
          "(one pread per port), so a port that goes down is reported within this period whatever "
          "--interval is, even without access to the verbs devices' events. 0 turns it off.");
ABSL_FLAG(bool, early_cycle_on_errors, true,
          "With --link_state_interval, also watch each InfiniBand port's link error counters "
          "(symbol_error, link_error_recovery, link_downed, port_rcv_errors, "
          "local_link_integrity_errors, excessive_buffer_overrun_errors) at that period, and run "
          "the sampling cycle at once when one moves (at most one extra cycle per interval; it "
          "reads the InfiniBand counters only), so an error burst is reported within the period "
          "whatever --interval is.");
ABSL_FLAG(absl::Duration, rediscover_interval, absl::Seconds(30),
          "List ports and counter files again at this interval.");
ABSL_FLAG(std::string, aggregator, "",
          "Stream samples, link events and collective records to this aggregator (host:port), or "
          "to every replica of its shard (host:port,host:port: each gets everything, through "
          "its own buffer); empty: no upload.");
ABSL_FLAG(std::string, shard_map, "",
          "Aggregator shards instead of --aggregator (docs/scale.md): a file with one shard a line "
          "(NAME HOST:PORT [HOST:PORT...], the replicas), or statefulset:COUNT:TEMPLATE[,TEMPLATE] "
          "with {shard} in each replica's address. This node's counters and link events go to "
          "the replicas of its shard (by its leaf switch: see --shard-placement); each job's "
          "collective records to the replicas of the job's shard.");
ABSL_FLAG(std::string, shard_placement, "auto",
          "With --shard-map, what places this node on a shard: topology (its leaf in the "
          "--topology file), lldp (the switch lldpd sees at the other end of its RoCE ports; the "
          "node moves when that changes), name (a hash of the node name), or auto: the file when "
          "it knows the node, else its leaf in its own --fabric-discover graph, else LLDP, else "
          "the name (docs/scale.md).");
ABSL_FLAG(absl::Duration, shard_placement_wait, absl::Seconds(10),
          "With --shard-placement=auto|lldp and no leaf from --topology: how long to wait at "
          "start for lldpd to name this node's leaf before placing by name (the node moves when "
          "LLDP names one later). lldpd sends every 30 s by default (tx-interval), so a lldpd "
          "started with the agent may need longer.");
ABSL_FLAG(std::string, topology, "",
          "With --shard-map: ibnetdiscover output or \"node switch\" lines, so that the nodes "
          "of one leaf switch share a shard (the aggregators' --topology).");
ABSL_FLAG(int64_t, upload_buffer, int64_t{64} << 20,
          "Memory (bytes) for messages the aggregator has not acknowledged yet, per replica; when "
          "full, the oldest sample batches are dropped first.");
ABSL_FLAG(absl::Duration, upload_flush_timeout, absl::Seconds(2),
          "On SIGTERM, wait this long for the aggregator to acknowledge what is buffered.");
ABSL_FLAG(absl::Duration, upload_backoff_max, absl::Seconds(30),
          "Longest wait between attempts to reach the aggregator (the wait starts at 100ms and "
          "grows 1.6x per failed attempt, with 20% jitter).");
ABSL_FLAG(std::string, collectives_socket, "/run/ringside/collectives.sock",
          "Unix socket where the NCCL profiler plugin (libringside_nccl.so) sends collective "
          "records; empty for none. A socket systemd passes with FileDescriptorName=collectives "
          "is used instead.");
ABSL_FLAG(std::string, collectives_socket_group, "",
          "Group owning the socket (mode 0660), so training processes of that group may connect; "
          "default: the agent's group.");
ABSL_FLAG(double, collectives_rate, 50000, "Records per second accepted per plugin connection.");
ABSL_FLAG(double, collectives_burst, 100000, "Records accepted at once per connection.");
ABSL_FLAG(std::string, fabric_scan, "",
          "Fabric scan through libibmad: LIDs and ports whose PMA counters and PortInfo state to "
          "read, switch ports included, e.g. \"18:1,9-12;105\" (';' between LIDs, ports as "
          "perfquery takes them; a LID alone: all its ports), or \"discovered\": every switch "
          "port of the subnet --fabric-discover finds, following it as the fabric changes. "
          "Empty: off.");
ABSL_FLAG(std::string, fabric_scan_ca, "", "Local CA the fabric scan's MADs leave from.");
ABSL_FLAG(int, fabric_scan_ca_port, 0, "Port of --fabric-scan-ca (0: the first active).");
ABSL_FLAG(absl::Duration, fabric_discover, absl::ZeroDuration(),
          "InfiniBand subnet discovery (directed-route SMPs from --fabric-scan-ca) every this "
          "long, e.g. 5m; the graph goes to the aggregator as ib_node / ib_link info records. "
          "0: off. Run it on a few agents only (docs/fabric-scan.md).");
ABSL_FLAG(double, fabric_discover_rate, 500,
          "SMPs per second at most that a discovery pass sends (0: unpaced).");
ABSL_FLAG(bool, lldp, true,
          "Read each netdev's LLDP neighbour (switch and port) from lldpd (docs/lldp.md); without "
          "lldpd the collector stays off, says so once and retries.");
ABSL_FLAG(std::string, lldp_socket, "/run/lldpd.socket",
          "lldpd's control socket (the agent needs the _lldpd group to open it).");
ABSL_FLAG(absl::Duration, lldp_interval, absl::Seconds(10), "How often lldpd is asked.");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain of this agent (mTLS).");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls-cert.");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA that signed the aggregator's certificate; enables TLS to the aggregator.");
ABSL_FLAG(absl::Duration, tls_refresh_interval, absl::Seconds(60),
          "How often --tls-cert, --tls-key and --tls-ca are checked for renewal: the next "
          "connection to the aggregator uses the new files.");
ABSL_FLAG(bool, allow_insecure, false,
          "Allow plaintext to a non-loopback aggregator (without --tls-ca).");

namespace {

using ringside::daemon::LogLine;

std::string HostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}

ringside::daemon::HttpResponse HealthResponse(const ringside::daemon::HealthVerdict& v) {
  ringside::daemon::HttpResponse r;
  r.status = v.ok ? 200 : 503;
  r.body = absl::StrCat(v.reason, "\n");
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  // Debian builds Abseil without NDEBUG, which leaves Mutex deadlock detection on: every lock
  // would update a global lock graph under a global spin lock. ringside's lock order is fixed and
  // its tests run under the same library, so production skips it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  {
    absl::FlagsUsageConfig usage;
    usage.version_string = [] { return std::string("ringside-agent " RINGSIDE_VERSION "\n"); };
    absl::SetFlagsUsageConfig(usage);
  }
  absl::SetProgramUsageMessage(
      "ringside-agent: per-node InfiniBand/RoCE/netdev counter agent.\n"
      "  ringside-agent --sysfs-root=/sys --listen=:9471\n"
      "  ringside-agent --once --sysfs-root=DIR -o json");
  std::vector<std::string> args = ringside::daemon::NormalizeFlagNames(argc, argv);
  std::vector<char*> argp = ringside::daemon::ArgvPointers(args);
  absl::ParseCommandLine(static_cast<int>(args.size()), argp.data());
  ringside::daemon::SetLogProgram("ringside-agent");

  // A collectives socket passed by systemd (ringside-collectives.socket). First thing, before
  // any library can start a thread: reading $LISTEN_* also clears them (unsetenv).
  absl::StatusOr<ringside::daemon::InheritedSocket> inherited =
      ringside::daemon::TakeInheritedUnixListener("collectives");
  if (!inherited.ok()) {
    LogLine(absl::StrCat("ignoring the socket systemd passed: ", inherited.status().ToString()));
    inherited = ringside::daemon::InheritedSocket{};
  } else if (inherited->fd < 0 && inherited->passed > 0) {
    LogLine(absl::StrCat("systemd passed ", inherited->passed,
                         " socket(s), none named \"collectives\" (FileDescriptorName=): unused"));
  }

  const std::string output = absl::GetFlag(FLAGS_o);
  if (output != "text" && output != "json") {
    std::fprintf(stderr, "ringside-agent: -o must be text or json, not \"%s\"\n", output.c_str());
    return 2;
  }
  const absl::Duration interval = absl::GetFlag(FLAGS_interval);
  if (absl::GetFlag(FLAGS_link_state_interval) < absl::ZeroDuration()) {
    std::fprintf(stderr, "ringside-agent: --link_state_interval must be 0 (off) or positive\n");
    return 2;
  }
  if (interval < absl::Milliseconds(1)) {
    std::fprintf(stderr, "ringside-agent: --interval must be at least 1ms\n");
    return 2;
  }
  std::string node = absl::GetFlag(FLAGS_node_name);
  if (node.empty()) node = HostName();

  ringside::collectors::InfinibandOptions ib;
  ib.sysfs_root = absl::GetFlag(FLAGS_sysfs_root);
  ib.rediscover_interval = absl::GetFlag(FLAGS_rediscover_interval);
  ringside::collectors::NetdevOptions nd;
  nd.sysfs_root = ib.sysfs_root;
  nd.rediscover_interval = ib.rediscover_interval;

  std::vector<std::unique_ptr<ringside::collectors::Collector>> collectors;
  collectors.push_back(std::make_unique<ringside::collectors::InfinibandCollector>(ib));
  collectors.push_back(std::make_unique<ringside::collectors::NetdevCollector>(nd));
  const std::string ethtool_source = absl::GetFlag(FLAGS_ethtool_source);
  if (ethtool_source != "off") {
    absl::StatusOr<ringside::collectors::EthtoolSource> src =
        ringside::collectors::ParseEthtoolSource(ethtool_source);
    if (!src.ok()) {
      std::fprintf(stderr, "ringside-agent: --ethtool-source: %s\n", src.status().ToString().c_str());
      return 2;
    }
    ringside::collectors::EthtoolOptions eth;
    eth.sysfs_root = ib.sysfs_root;
    eth.source = *src;
    eth.rediscover_interval = ib.rediscover_interval;
    collectors.push_back(std::make_unique<ringside::collectors::EthtoolCollector>(eth));
  }
  // Discovery first: `--fabric-scan=discovered` takes its targets from it. With both, the scan
  // and the discovery share one umad port (mad_transport.h SharedIbmadPort).
  std::shared_ptr<ringside::collectors::SharedIbmadPort> mad_port;
  if (absl::GetFlag(FLAGS_fabric_discover) > absl::ZeroDuration() &&
      !absl::GetFlag(FLAGS_fabric_scan).empty()) {
    ringside::collectors::MadPortOptions mo;
    mo.ca_name = absl::GetFlag(FLAGS_fabric_scan_ca);
    mo.ca_port = absl::GetFlag(FLAGS_fabric_scan_ca_port);
    if (auto p = ringside::collectors::OpenSharedIbmadPort(mo); p.ok()) mad_port = *std::move(p);
    // else each collector opens its own, fails the same way and says so (Availability).
  }
  ringside::collectors::IbDiscoveryCollector* discovery = nullptr;
  if (const absl::Duration period = absl::GetFlag(FLAGS_fabric_discover);
      period > absl::ZeroDuration()) {
    ringside::collectors::IbDiscoveryOptions d;
    d.port.ca_name = absl::GetFlag(FLAGS_fabric_scan_ca);
    d.port.ca_port = absl::GetFlag(FLAGS_fabric_scan_ca_port);
    d.discovery.max_mads_per_second = absl::GetFlag(FLAGS_fabric_discover_rate);
    d.discovery.max_duration = std::min(period, absl::Minutes(10));
    d.period = period;
    auto c = ringside::collectors::IbDiscoveryCollector::Create(std::move(d), mad_port);
    discovery = c.get();
    collectors.push_back(std::move(c));
  }
  ringside::collectors::IbmadCollector* fabric_scan = nullptr;
  if (const std::string targets = absl::GetFlag(FLAGS_fabric_scan); !targets.empty()) {
    ringside::collectors::IbmadOptions io;
    if (targets == "discovered") {
      if (discovery == nullptr) {
        std::fprintf(stderr, "ringside-agent: --fabric-scan=discovered needs --fabric-discover\n");
        return 2;
      }
      io.target_source = [discovery](uint64_t* version) {
        return discovery->SwitchTargets(version);
      };
    } else {
      absl::StatusOr<std::vector<ringside::collectors::ScanTarget>> parsed =
          ringside::collectors::ParseScanTargets(targets);
      if (!parsed.ok()) {
        std::fprintf(stderr, "ringside-agent: --fabric-scan: %s\n",
                     parsed.status().ToString().c_str());
        return 2;
      }
      io.targets = *parsed;
    }
    io.port.ca_name = absl::GetFlag(FLAGS_fabric_scan_ca);
    io.port.ca_port = absl::GetFlag(FLAGS_fabric_scan_ca_port);
    auto scan = ringside::collectors::IbmadCollector::Create(io, mad_port);
    fabric_scan = scan.get();
    collectors.push_back(std::move(scan));
  }
  const std::string nvml_library = absl::GetFlag(FLAGS_nvml_library);
  ringside::collectors::NvmlCollector* nvml = nullptr;
  if (!nvml_library.empty()) {
    ringside::collectors::NvmlOptions nv;
    nv.library = nvml_library;
    nv.rediscover_interval = ib.rediscover_interval;
    nv.slow_interval = absl::GetFlag(FLAGS_nvml_slow_interval);
    nv.xid_events = absl::GetFlag(FLAGS_nvml_xid_events);
    auto c = std::make_unique<ringside::collectors::NvmlCollector>(nv);
    nvml = c.get();
    collectors.push_back(std::move(c));
  }
  // The cgroups come from the collective listener, made later: the collector asks through this.
  auto cgroup_source = std::make_shared<std::function<std::vector<std::string>()>>();
  if (absl::GetFlag(FLAGS_host_signals)) {
    ringside::collectors::HostOptions ho;
    ho.procfs_root = absl::GetFlag(FLAGS_procfs_root);
    ho.sysfs_root = ib.sysfs_root;
    ho.cgroups = [cgroup_source] {
      return *cgroup_source ? (*cgroup_source)() : std::vector<std::string>{};
    };
    collectors.push_back(std::make_unique<ringside::collectors::HostCollector>(ho));
  }
  if (absl::GetFlag(FLAGS_lldp)) {
    ringside::collectors::LldpOptions lo;
    lo.client.socket_path = absl::GetFlag(FLAGS_lldp_socket);
    lo.refresh_interval = absl::GetFlag(FLAGS_lldp_interval);
    lo.log = [](const std::string& m) { LogLine(m); };
    collectors.push_back(std::make_unique<ringside::collectors::LldpCollector>(lo));
  }
  // A collector whose source is absent says so once, here, and in ringside_agent_collector_up.
  for (const auto& c : collectors) {
    if (absl::Status a = c->Availability(); !a.ok()) {
      LogLine(absl::StrCat(c->name(), " collector off: ", a.ToString()));
    }
  }

  ringside::daemon::SamplerOptions so;
  so.node = node;
  so.interval = interval;
  ringside::daemon::Sampler sampler(so, std::move(collectors), absl::Now,
                                    [](const std::string& m) { LogLine(m); });

  if (absl::GetFlag(FLAGS_once)) {
    auto snap = sampler.RunOnce();
    std::string text = output == "json" ? ringside::daemon::RenderJson(*snap)
                                        : ringside::daemon::RenderText(*snap);
    std::fwrite(text.data(), 1, text.size(), stdout);
    for (const auto& h : snap->health) {
      if (h.read_errors_total > 0) {
        LogLine(absl::StrCat(h.name, ": ", h.read_errors_total, " read errors"));
      }
    }
    return 0;
  }

  // systemd (Type=notify, WatchdogSec=); all no-ops without it.
  // Shared with the signal thread, which may run until the process ends.
  auto notifier = std::make_shared<ringside::daemon::SystemdNotifier>();
  const absl::Duration upload_flush_timeout = absl::GetFlag(FLAGS_upload_flush_timeout);
  if (notifier->active()) {
    const absl::Duration wd = notifier->watchdog_period();
    LogLine(absl::StrCat("systemd notification socket set; watchdog ",
                         wd > absl::ZeroDuration()
                             ? absl::StrCat(absl::FormatDuration(wd), ", pet after sampling cycles")
                             : std::string("off")));
    if (std::string w = ringside::daemon::WatchdogPeriodWarning("sampling cycle", interval, wd);
        !w.empty()) {
      LogLine(w);
    }
  }

  absl::Notification stop;
  ringside::daemon::InstallStopSignals(&stop, [notifier, upload_flush_timeout] {
    notifier->Stopping(absl::StrCat("stopping (upload flush at most ",
                                    absl::FormatDuration(upload_flush_timeout), ")"));
  });

  // Link transitions from netlink and verbs, read as they arrive by their own thread.
  ringside::daemon::LinkEventLog link_log;
  std::unique_ptr<ringside::daemon::LinkEventReader> link_reader;
  if (absl::GetFlag(FLAGS_link_events)) {
    std::unique_ptr<ringside::collectors::NetlinkLinkWatcher> netlink;
    if (auto w = ringside::collectors::NetlinkLinkWatcher::Open(); w.ok()) {
      netlink = std::move(*w);
      if (netlink->receive_buffer_capped()) {
        // Overflows (lost link notifications, each answered with a full dump) come sooner.
        LogLine(absl::StrCat("netlink receive buffer capped at ", netlink->receive_buffer_bytes(),
                             " bytes (asked ", netlink->receive_buffer_wanted(),
                             "): raise net.core.rmem_max or grant CAP_NET_ADMIN"));
      }
    } else {
      LogLine(absl::StrCat("netlink link events off: ", w.status().ToString()));
    }
    std::unique_ptr<ringside::collectors::VerbsPortWatcher> verbs;
    // Kept even with no device yet: it rescans, so a device that appears (or comes back after a
    // driver reload or firmware reset) is watched without restarting the agent.
    if (auto v = ringside::collectors::VerbsPortWatcher::Open(); v.ok()) verbs = std::move(*v);
    ringside::daemon::LinkEventReader::Options lo;
    lo.clock = sampler.clock();  // events in one order with the sample times
    link_reader = std::make_unique<ringside::daemon::LinkEventReader>(&link_log, std::move(netlink),
                                                                      std::move(verbs), lo);
    if (const absl::Duration period = absl::GetFlag(FLAGS_link_state_interval);
        period > absl::ZeroDuration()) {
      ringside::collectors::PortStateWatchOptions po;
      po.sysfs_root = ib.sysfs_root;
      std::function<void()> on_errors;
      if (absl::GetFlag(FLAGS_early_cycle_on_errors) && period < interval) {
        po.counters = {"symbol_error",    "link_error_recovery",         "link_downed",
                       "port_rcv_errors", "local_link_integrity_errors", "excessive_buffer_overrun_errors"};
        sampler.EnableEarlyCycles({"infiniband"});
        on_errors = [&sampler] { sampler.RequestCycle(); };
      }
      link_reader->WatchPortStates(std::make_unique<ringside::collectors::PortStateWatcher>(po),
                                   period, std::move(on_errors));
    }
    link_reader->Start();
  }
  // XID events, waited for on their own thread and logged with the link events.
  std::unique_ptr<ringside::daemon::XidReader> xid_reader;
  if (nvml != nullptr && nvml->xid_events() != nullptr) {
    ringside::daemon::XidReaderOptions xo;
    xo.clock = [clock = sampler.clock()] { return clock->Now(); };
    xo.log = [](const std::string& m) { LogLine(m); };
    xid_reader = std::make_unique<ringside::daemon::XidReader>(nvml->xid_events(), &link_log, xo);
  }

  // Streaming to the aggregator (declared before the exposer, which reads its stats).
  // Every listed aggregator is a replica of this node's shard and gets everything, each through
  // its own buffer (upload_fanout.h).
  std::unique_ptr<ringside::daemon::UploadFanout> uploader;
  // With shards, where this node's counters and each job's records go (analysis/shard_map.h).
  std::shared_ptr<const ringside::analysis::ShardMap> shards;
  std::shared_ptr<const ringside::analysis::Topology> agent_topology;
  std::shared_ptr<ringside::daemon::ShardPlacement> placement;
  std::string aggregator = absl::GetFlag(FLAGS_aggregator);
  if (const std::string spec = absl::GetFlag(FLAGS_shard_map); !spec.empty()) {
    if (!aggregator.empty()) {
      std::fprintf(stderr, "ringside-agent: give --aggregator or --shard-map, not both\n");
      return 2;
    }
    absl::StatusOr<ringside::analysis::ShardMap> m = ringside::daemon::LoadShardMap(spec);
    if (!m.ok()) {
      std::fprintf(stderr, "ringside-agent: --shard-map: %s\n", m.status().ToString().c_str());
      return 2;
    }
    shards = std::make_shared<const ringside::analysis::ShardMap>(*std::move(m));
    if (const std::string file = absl::GetFlag(FLAGS_topology); !file.empty()) {
      absl::StatusOr<ringside::analysis::Topology> t = ringside::daemon::LoadTopology(file);
      if (!t.ok()) {
        std::fprintf(stderr, "ringside-agent: --topology: %s\n", t.status().ToString().c_str());
        return 2;
      }
      agent_topology = std::make_shared<const ringside::analysis::Topology>(*std::move(t));
    }
    absl::StatusOr<ringside::daemon::ShardPlacementMode> mode =
        ringside::daemon::ParseShardPlacementMode(absl::GetFlag(FLAGS_shard_placement));
    if (!mode.ok()) {
      std::fprintf(stderr, "ringside-agent: --shard-placement: %s\n", mode.status().ToString().c_str());
      return 2;
    }
    if (*mode == ringside::daemon::ShardPlacementMode::kTopology && !agent_topology) {
      std::fprintf(stderr, "ringside-agent: --shard-placement=topology needs --topology\n");
      return 2;
    }
    placement = std::make_shared<ringside::daemon::ShardPlacement>(shards, *mode, node,
                                                                   agent_topology);
    if (placement->UsesDiscovery() && absl::GetFlag(FLAGS_lldp)) {
      // The first LLDP read before the first cycle: lldpd asked directly, every second.
      ringside::collectors::LldpClientOptions client;
      client.socket_path = absl::GetFlag(FLAGS_lldp_socket);
      const std::string sysfs_root = ib.sysfs_root;
      const absl::Duration wait = absl::GetFlag(FLAGS_shard_placement_wait);
      absl::StatusOr<std::string> leaf = ringside::daemon::WaitForLeaf(
          [&]() -> absl::StatusOr<std::string> {
            absl::StatusOr<std::vector<ringside::collectors::LldpNeighbor>> n =
                ringside::collectors::ReadLldpNeighbors(client);
            if (!n.ok()) return n.status();
            return ringside::daemon::LldpLeafFromNeighbors(
                node, *n,
                ringside::collectors::MapNetdevsToRdmaPorts(
                    ringside::collectors::DefaultFileSystem(), sysfs_root));
          },
          wait, absl::Seconds(1));
      if (!leaf.ok()) {
        LogLine(absl::StrCat("shard placement: no LLDP (", leaf.status().message(),
                             "): placed by name at once, moves when LLDP names a leaf"));
      } else if (leaf->empty()) {
        LogLine(absl::StrCat("shard placement: LLDP named no leaf within ",
                             absl::FormatDuration(wait),
                             " (--shard-placement-wait): placed by name, moves when it names one"));
      } else {
        placement = std::make_shared<ringside::daemon::ShardPlacement>(shards, *mode, node,
                                                                       agent_topology, *leaf);
      }
    }
    aggregator = absl::StrJoin(placement->replicas(), ",");
    LogLine(absl::StrCat("shard ", placement->shard(), " of ", shards->size(), " (placed by ",
                         placement->key(), "): counters to ", aggregator));
  }
  if (!aggregator.empty()) {
    const int64_t buffer = absl::GetFlag(FLAGS_upload_buffer);
    if (buffer < (int64_t{1} << 20)) {
      std::fprintf(stderr, "ringside-agent: --upload-buffer must be at least 1048576 bytes\n");
      return 2;
    }
    absl::StatusOr<std::vector<std::string>> targets =
        ringside::daemon::ParseAggregatorList(aggregator);
    if (!targets.ok()) {
      std::fprintf(stderr, "ringside-agent: --aggregator=%s: %s\n", aggregator.c_str(),
                   targets.status().ToString().c_str());
      return 2;
    }
    ringside::daemon::UploaderOptions uo;
    uo.node = node;
    uo.agent_version = RINGSIDE_VERSION;
    uo.buffer_bytes = static_cast<size_t>(buffer);
    uo.backoff.max = std::max(absl::GetFlag(FLAGS_upload_backoff_max), uo.backoff.initial);
    uo.tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
    uo.tls.key_file = absl::GetFlag(FLAGS_tls_key);
    uo.tls.ca_file = absl::GetFlag(FLAGS_tls_ca);
    uo.tls.allow_insecure = absl::GetFlag(FLAGS_allow_insecure);
    uo.tls.refresh_interval_s = static_cast<unsigned>(
        std::max<int64_t>(1, absl::ToInt64Seconds(absl::GetFlag(FLAGS_tls_refresh_interval))));
    absl::StatusOr<std::unique_ptr<ringside::daemon::UploadFanout>> up =
        ringside::daemon::UploadFanout::Create(
            uo, *targets, link_reader || xid_reader ? &link_log : nullptr,
            shards ? ringside::daemon::JobReplicas([shards](absl::string_view job) {
              return shards->shards()[shards->ShardOfJob(job)].replicas;
            })
                   : nullptr);
    if (!up.ok()) {
      std::fprintf(stderr, "ringside-agent: --aggregator=%s: %s\n", aggregator.c_str(),
                   up.status().ToString().c_str());
      return 2;
    }
    uploader = std::move(*up);
    for (size_t i = 0; i < uploader->size(); ++i) {
      LogLine(absl::StrCat("uploading to ", uploader->replica(i)->options().target,
                           " (agent epoch ", uploader->replica(i)->agent_epoch(), ", buffer ",
                           buffer, " bytes)"));
    }
  }

  // Collective records from the NCCL plugins on this node, forwarded upstream. A socket that
  // cannot be made (no permission, another agent listening) turns collectives off, loudly.
  // A socket passed by systemd (ringside-collectives.socket) is used as it is: systemd made it
  // with its mode and group, and owns the file.
  std::unique_ptr<ringside::daemon::CollectiveListener> collectives;
  std::string socket = absl::GetFlag(FLAGS_collectives_socket);
  if (inherited->fd >= 0) {
    if (!socket.empty() && socket != inherited->path) {
      LogLine(absl::StrCat("--collectives-socket=", socket, " ignored: systemd passed ",
                           inherited->path));
    }
    socket = inherited->path.empty() ? std::string("(inherited)") : inherited->path;
  }
  if (!socket.empty() || inherited->fd >= 0) {
    std::error_code ec;
    if (inherited->fd < 0) {
      std::filesystem::create_directories(std::filesystem::path(socket).parent_path(), ec);
    }
    ringside::daemon::CollectiveListenerOptions co;
    co.socket_path = socket;
    co.inherited_fd = inherited->fd;
    co.socket_group = absl::GetFlag(FLAGS_collectives_socket_group);
    co.records_per_second = absl::GetFlag(FLAGS_collectives_rate);
    co.burst_records = absl::GetFlag(FLAGS_collectives_burst);
    co.node = node;
    auto started = ringside::daemon::CollectiveListener::Start(
        co,
        [up = uploader.get()](ringside::v1::CollectiveBatch batch) {
          // The node's clock bound with every batch (one adjtimex read, no privilege): the
          // aggregator compares enqueue times across nodes only within it. Refused (the systemd
          // unit's ProtectClock=yes): no bound, said once.
          if (std::optional<ringside::v1::ClockBound> clock = ringside::daemon::ReadClockBound()) {
            *batch.mutable_clock() = *clock;
          } else {
            static std::atomic<bool> said{false};
            if (!said.exchange(true)) {
              LogLine(absl::StrCat("clock bound: adjtimex refused (", std::strerror(errno),
                                   "); collective batches go without it, so the aggregator "
                                   "cannot compare enqueue times across nodes (docs/privileges.md)"));
            }
          }
          if (up != nullptr) up->EnqueueCollectives(std::move(batch));
        },
        ringside::daemon::SteadyNow, [](const std::string& m) { LogLine(m); });
    if (started.ok()) {
      collectives = std::move(*started);
      *cgroup_source = [listener = collectives.get(),
                        age = absl::GetFlag(FLAGS_cgroup_forget_after)] {
        return listener->RecentCgroups(age);
      };
      LogLine(absl::StrCat("collective records on ", socket,
                           inherited->fd >= 0
                               ? absl::StrCat(" (socket from systemd, fd ", inherited->fd, ")")
                               : std::string(" (socket created by the agent, mode 0660)")));
    } else {
      LogLine(absl::StrCat("collective listener off: ", started.status().ToString()));
    }
  }

  ringside::daemon::RatePrinter rates(static_cast<size_t>(std::max(1, absl::GetFlag(FLAGS_rates_top))));
  const bool print_rates = absl::GetFlag(FLAGS_print_rates);
  ringside::daemon::AgentHealthOptions ho;
  ho.interval = interval;
  if (uploader) {
    ho.upload_stats = [up = uploader.get()] {
      std::vector<ringside::daemon::ReplicaUploadStats> out;
      for (size_t i = 0; i < up->size(); ++i) {
        if (auto r = up->replica(i)) out.push_back({r->options().target, r->Stats()});
      }
      return out;
    };
  }
  ringside::daemon::AgentHealth health(ho);
  // STATUS= every 10s after READY's own (sampling thread only).
  absl::Time last_status = absl::Now();
  auto on_cycle = [&](const std::shared_ptr<const ringside::daemon::AgentSnapshot>& snap) {
    // After every completed cycle, on the sampling thread: a hung collector stops both.
    health.OnCycle();
    notifier->PetWatchdog();
    if (notifier->active() && snap->timestamp - last_status >= absl::Seconds(10)) {
      last_status = snap->timestamp;
      notifier->Status(absl::StrCat("cycle ", snap->cycle, "; ", health.Ready().reason));
    }
    // Switch-side transitions the fabric scan saw join the same transition log.
    if (fabric_scan != nullptr) {
      std::vector<ringside::collectors::LinkEvent> events = fabric_scan->TakeEvents();
      if (!events.empty()) link_log.Append(std::move(events));
    }
    // The node's leaf changed (recabling, or LLDP named it after the start): move its uploads.
    if (placement && uploader) {
      ringside::daemon::ShardPlacement::Change c = placement->OnSnapshot(*snap);
      if (c.moved) {
        LogLine(absl::StrCat("shard moved from ", c.from, " to ", c.to, " (placed by ", c.key,
                             "): counters to ", absl::StrJoin(c.replicas, ",")));
        if (absl::Status st = uploader->MoveNodeTo(c.replicas, upload_flush_timeout); !st.ok()) {
          LogLine(absl::StrCat("shard move to ", c.to, " failed: ", st.ToString()));
        }
      } else if (c.key_changed) {
        LogLine(absl::StrCat("shard ", c.to, " kept (now placed by ", c.key, ")"));
      }
    }
    if (uploader) uploader->OnSnapshot(*snap);
    if (!print_rates) return;
    std::string text = rates.Render(*snap);
    if (!text.empty()) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    }
  };
  // The first cycle runs before /metrics opens, so no scrape ever sees a page without the node's
  // series; Run() goes on one interval after it.
  on_cycle(sampler.RunOnce());

  std::unique_ptr<ringside::daemon::HttpServer> http;
  ringside::daemon::ExpositionOptions eo;
  eo.version = RINGSIDE_VERSION;
  eo.links = link_reader ? &link_log : nullptr;
  eo.link_reader = link_reader.get();
  eo.ethtool_all = absl::GetFlag(FLAGS_ethtool_all_metrics);
  if (uploader) {
    eo.extra_families = [up = uploader.get(), placement] {
      std::vector<prometheus::MetricFamily> out = up->MetricFamilies();
      if (placement) {
        for (prometheus::MetricFamily& f : placement->MetricFamilies()) out.push_back(std::move(f));
      }
      return out;
    };
  }
  auto collectable = std::make_shared<ringside::daemon::SnapshotCollectable>(&sampler, eo);
  const std::string listen = absl::GetFlag(FLAGS_listen);
  std::shared_ptr<prometheus::Collectable> collective_families;
  if (collectives) {
    collective_families =
        std::make_shared<ringside::daemon::CollectiveListenerCollectable>(collectives.get(), node);
  }
  if (!listen.empty()) {
    absl::StatusOr<std::unique_ptr<ringside::daemon::HttpServer>> started =
        ringside::daemon::HttpServer::Start(listen, [] {
          ringside::daemon::HttpServerOptions ho;
          ho.threads = 2;
          ho.web_config_file = absl::GetFlag(FLAGS_web_config_file);
          ho.log = [](const std::string& line) { LogLine(line); };
          return ho;
        }());
    if (!started.ok()) {
      std::fprintf(stderr, "ringside-agent: %s\n", std::string(started.status().message()).c_str());
      return 1;
    }
    http = std::move(*started);
    http->Handle("/metrics",
                 [collectable, collective_families](const ringside::daemon::HttpRequest&) {
                   std::vector<prometheus::MetricFamily> families = collectable->Collect();
                   if (collective_families) {
                     for (prometheus::MetricFamily& f : collective_families->Collect()) {
                       families.push_back(std::move(f));
                     }
                   }
                   ringside::daemon::HttpResponse r;
                   r.content_type = "text/plain; version=0.0.4; charset=utf-8";
                   r.body = prometheus::TextSerializer().Serialize(families);
                   return r;
                 });
    http->Handle("/healthz", [&health](const ringside::daemon::HttpRequest&) {
      return HealthResponse(health.Live());
    });
    http->Handle("/readyz", [&health](const ringside::daemon::HttpRequest&) {
      return HealthResponse(health.Ready());
    });
    // Parsed by tests, the simulator and the deploy checks: keep "serving /metrics on A (port N)".
    LogLine(absl::StrCat("serving /metrics on ", listen, " (port ", http->port(),
                         "), with /healthz and /readyz",
                         http->tls() ? ", over TLS (web config)" : ""));
    if (!http->tls() && absl::GetFlag(FLAGS_web_config_file).empty() &&
        !ringside::daemon::IsLoopbackAddress(listen)) {
      LogLine(absl::StrCat("warning: /metrics on ", listen,
                           " is plaintext without authentication: give --web.config.file "
                           "(docs/http-security.md)"));
    }
  }
  LogLine(absl::StrCat("node ", node, ", sysfs root ", ib.sysfs_root, ", interval ",
                       absl::FormatDuration(interval)));

  const absl::Duration duration = absl::GetFlag(FLAGS_duration);
  if (duration != absl::InfiniteDuration()) {
    std::thread([&stop, duration]() {
      absl::SleepFor(duration);
      if (!stop.HasBeenNotified()) stop.Notify();
    }).detach();
  }

  // Ready: the first cycle is published, /metrics listens, the collectives socket is set up.
  notifier->Ready(
      absl::StrCat("sampling every ", absl::FormatDuration(interval),
                   listen.empty() ? "" : absl::StrCat("; /metrics on ", listen),
                   collectives ? absl::StrCat("; collectives on ", socket) : "",
                   uploader ? absl::StrCat("; uploading to ", aggregator) : ""));

  sampler.Run(stop, on_cycle);
  if (uploader) {
    // Bounded: what the aggregator has not acknowledged by then is lost (and logged).
    uploader->Shutdown(upload_flush_timeout);
  }
  http.reset();
  LogLine("stopped");
  return 0;
}
