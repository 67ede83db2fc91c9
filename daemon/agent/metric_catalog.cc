#include "daemon/agent/metric_catalog.h"

#include <array>
#include <cstdlib>
#include <cstdio>

namespace ringside::daemon {
namespace {

constexpr MetricType C = MetricType::kCounter;
constexpr MetricType G = MetricType::kGauge;

// clang-format off
constexpr std::array kCatalog = std::to_array<MetricSpec>({
  // ports/<n>/counters/ (IB PMA). Data counters are kept in 4-byte words: exported in bytes.
  {"infiniband", "port_rcv_data", "ringside_ib_port_received_bytes_total", C, 4, "Data octets received on the port (PMA PortRcvData x 4)."},
  {"infiniband", "port_xmit_data", "ringside_ib_port_transmitted_bytes_total", C, 4, "Data octets transmitted on the port (PMA PortXmitData x 4)."},
  {"infiniband", "port_rcv_packets", "ringside_ib_port_received_packets_total", C, 1, "Packets received, including packets with errors."},
  {"infiniband", "port_xmit_packets", "ringside_ib_port_transmitted_packets_total", C, 1, "Packets transmitted, including packets with errors."},
  {"infiniband", "unicast_rcv_packets", "ringside_ib_port_unicast_received_packets_total", C, 1, "Unicast packets received."},
  {"infiniband", "unicast_xmit_packets", "ringside_ib_port_unicast_transmitted_packets_total", C, 1, "Unicast packets transmitted."},
  {"infiniband", "multicast_rcv_packets", "ringside_ib_port_multicast_received_packets_total", C, 1, "Multicast packets received."},
  {"infiniband", "multicast_xmit_packets", "ringside_ib_port_multicast_transmitted_packets_total", C, 1, "Multicast packets transmitted."},
  {"infiniband", "symbol_error", "ringside_ib_port_symbol_errors_total", C, 1, "Minor link errors on one or more physical lanes (16-bit, saturates)."},
  {"infiniband", "link_error_recovery", "ringside_ib_port_link_error_recoveries_total", C, 1, "Successful link error recoveries (retrains) (8-bit, saturates)."},
  {"infiniband", "link_downed", "ringside_ib_port_link_downed_total", C, 1, "Times link error recovery failed and the link went down (8-bit, saturates)."},
  {"infiniband", "port_rcv_errors", "ringside_ib_port_receive_errors_total", C, 1, "Packets received with errors."},
  {"infiniband", "port_rcv_remote_physical_errors", "ringside_ib_port_receive_remote_physical_errors_total", C, 1, "Packets received marked with EBP."},
  {"infiniband", "port_rcv_switch_relay_errors", "ringside_ib_port_receive_switch_relay_errors_total", C, 1, "Packets a switch could not forward."},
  {"infiniband", "port_xmit_discards", "ringside_ib_port_transmit_discards_total", C, 1, "Outbound packets discarded because the port was down or congested."},
  {"infiniband", "port_rcv_discards", "ringside_ib_port_receive_discards_total", C, 1, "Inbound packets discarded (driver-specific counter)."},
  {"infiniband", "port_xmit_constraint_errors", "ringside_ib_port_transmit_constraint_errors_total", C, 1, "Outbound packets failing raw, partition or IP-version constraints."},
  {"infiniband", "port_rcv_constraint_errors", "ringside_ib_port_receive_constraint_errors_total", C, 1, "Inbound packets failing raw, partition or IP-version constraints."},
  {"infiniband", "local_link_integrity_errors", "ringside_ib_port_local_link_integrity_errors_total", C, 1, "Times local physical errors exceeded the LocalPhyErrors threshold (4-bit, saturates)."},
  {"infiniband", "excessive_buffer_overrun_errors", "ringside_ib_port_excessive_buffer_overrun_errors_total", C, 1, "Consecutive flow-control periods with an input buffer overrun (4-bit, saturates)."},
  {"infiniband", "VL15_dropped", "ringside_ib_port_vl15_dropped_total", C, 1, "Incoming VL15 (management) packets dropped."},
  {"infiniband", "port_xmit_wait", "ringside_ib_port_transmit_wait_ticks_total", C, 1, "Ticks in which the port had data to send but sent none (device-defined tick)."},
  {"infiniband", "*", "ringside_ib_port_other_counter_total", C, 1, "A PMA counter file not in the catalog, by its file name."},
  // ports/<n>/counters_ext/ (mlx4, kernels before 4.5).
  {"infiniband_ext", "port_rcv_data_64", "ringside_ib_port_legacy_received_bytes_total", C, 4, "Data octets received, 64-bit legacy counters_ext (x 4)."},
  {"infiniband_ext", "port_xmit_data_64", "ringside_ib_port_legacy_transmitted_bytes_total", C, 4, "Data octets transmitted, 64-bit legacy counters_ext (x 4)."},
  {"infiniband_ext", "port_rcv_packets_64", "ringside_ib_port_legacy_received_packets_total", C, 1, "Packets received, 64-bit legacy counters_ext."},
  {"infiniband_ext", "port_xmit_packets_64", "ringside_ib_port_legacy_transmitted_packets_total", C, 1, "Packets transmitted, 64-bit legacy counters_ext."},
  {"infiniband_ext", "port_unicast_rcv_packets", "ringside_ib_port_legacy_unicast_received_packets_total", C, 1, "Unicast packets received, legacy counters_ext."},
  {"infiniband_ext", "port_unicast_xmit_packets", "ringside_ib_port_legacy_unicast_transmitted_packets_total", C, 1, "Unicast packets transmitted, legacy counters_ext."},
  {"infiniband_ext", "port_multicast_rcv_packets", "ringside_ib_port_legacy_multicast_received_packets_total", C, 1, "Multicast packets received, legacy counters_ext."},
  {"infiniband_ext", "port_multicast_xmit_packets", "ringside_ib_port_legacy_multicast_transmitted_packets_total", C, 1, "Multicast packets transmitted, legacy counters_ext."},
  {"infiniband_ext", "*", "ringside_ib_port_legacy_other_counter_total", C, 1, "A counters_ext file not in the catalog, by its file name."},
  // ports/<n>/hw_counters/ (mlx5 and other drivers).
  {"infiniband_hw", "rx_write_requests", "ringside_rdma_rx_write_requests_total", C, 1, "RDMA write requests received (mlx5 Q counter; the file is a 64-bit sum with the per-QP counters)."},
  {"infiniband_hw", "rx_read_requests", "ringside_rdma_rx_read_requests_total", C, 1, "RDMA read requests received (mlx5 Q counter; the file is a 64-bit sum with the per-QP counters)."},
  {"infiniband_hw", "rx_atomic_requests", "ringside_rdma_rx_atomic_requests_total", C, 1, "RDMA atomic requests received (mlx5 Q counter; the file is a 64-bit sum with the per-QP counters)."},
  {"infiniband_hw", "rx_dct_connect", "ringside_rdma_rx_dct_connect_requests_total", C, 1, "DCT connect requests received."},
  {"infiniband_hw", "out_of_buffer", "ringside_rdma_out_of_buffer_drops_total", C, 1, "Packets dropped because no receive WQE was posted."},
  {"infiniband_hw", "out_of_sequence", "ringside_rdma_out_of_sequence_packets_total", C, 1, "Out-of-sequence packets received (loss or reordering)."},
  {"infiniband_hw", "duplicate_request", "ringside_rdma_duplicate_request_packets_total", C, 1, "Duplicate requests received (retransmission)."},
  {"infiniband_hw", "rnr_nak_retry_err", "ringside_rdma_rnr_nak_retry_errors_total", C, 1, "RNR NAKs received without exceeding the retry limit."},
  {"infiniband_hw", "packet_seq_err", "ringside_rdma_packet_sequence_errors_total", C, 1, "NAK sequence-error packets received (loss)."},
  {"infiniband_hw", "implied_nak_seq_err", "ringside_rdma_implied_nak_sequence_errors_total", C, 1, "Read-response PSN gaps (implied NAK)."},
  {"infiniband_hw", "local_ack_timeout_err", "ringside_rdma_local_ack_timeout_errors_total", C, 1, "QP ACK timer expirations at the sender (loss or timeout)."},
  {"infiniband_hw", "resp_local_length_error", "ringside_rdma_resp_local_length_errors_total", C, 1, "Responder local length errors."},
  {"infiniband_hw", "resp_cqe_error", "ringside_rdma_resp_cqe_errors_total", C, 1, "Responder CQE errors."},
  {"infiniband_hw", "req_cqe_error", "ringside_rdma_req_cqe_errors_total", C, 1, "Requester CQE errors."},
  {"infiniband_hw", "req_remote_invalid_request", "ringside_rdma_req_remote_invalid_request_errors_total", C, 1, "Requester remote invalid request errors."},
  {"infiniband_hw", "req_remote_access_errors", "ringside_rdma_req_remote_access_errors_total", C, 1, "Requester remote access errors."},
  {"infiniband_hw", "resp_remote_access_errors", "ringside_rdma_resp_remote_access_errors_total", C, 1, "Responder remote access errors."},
  {"infiniband_hw", "resp_cqe_flush_error", "ringside_rdma_resp_cqe_flush_errors_total", C, 1, "Responder CQE flush errors."},
  {"infiniband_hw", "req_cqe_flush_error", "ringside_rdma_req_cqe_flush_errors_total", C, 1, "Requester CQE flush errors."},
  {"infiniband_hw", "roce_adp_retrans", "ringside_rdma_roce_adaptive_retransmits_total", C, 1, "RoCE adaptive retransmissions."},
  {"infiniband_hw", "roce_adp_retrans_to", "ringside_rdma_roce_adaptive_retransmit_timeouts_total", C, 1, "Timeouts under RoCE adaptive retransmission."},
  {"infiniband_hw", "roce_slow_restart", "ringside_rdma_roce_slow_restarts_total", C, 1, "Times RoCE slow restart was used."},
  {"infiniband_hw", "roce_slow_restart_cnps", "ringside_rdma_roce_slow_restart_cnps_total", C, 1, "CNPs generated by RoCE slow restart."},
  {"infiniband_hw", "roce_slow_restart_trans", "ringside_rdma_roce_slow_restart_transitions_total", C, 1, "Transitions into RoCE slow restart."},
  {"infiniband_hw", "rp_cnp_ignored", "ringside_rdma_rp_cnp_ignored_packets_total", C, 1, "CNPs received and ignored by the reaction point (should stay 0 with congestion control on)."},
  {"infiniband_hw", "rp_cnp_handled", "ringside_rdma_rp_cnp_handled_packets_total", C, 1, "CNPs handled by the reaction point to throttle its rate (DCQCN active at the sender)."},
  {"infiniband_hw", "np_ecn_marked_roce_packets", "ringside_rdma_np_ecn_marked_roce_packets_total", C, 1, "RoCEv2 packets received with ECN CE marked (congestion seen at the receiver)."},
  {"infiniband_hw", "np_cnp_sent", "ringside_rdma_np_cnp_sent_packets_total", C, 1, "CNPs sent by the notification point in response to CE marks."},
  {"infiniband_hw", "rx_icrc_encapsulated", "ringside_rdma_rx_icrc_encapsulated_errors_total", C, 1, "RoCE packets received with ICRC errors."},
  {"infiniband_hw", "lifespan", "ringside_rdma_hw_counters_lifespan_seconds", G, 0.001, "How long the driver caches hw_counters before a read refreshes them."},
  {"infiniband_hw", "*", "ringside_rdma_other_hw_counter_total", C, 1, "A hw_counters file not in the catalog, by its file name."},
  // Port attributes.
  {"infiniband_port", "state", "ringside_ib_port_state", G, 1, "Logical port state id: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER."},
  {"infiniband_port", "phys_state", "ringside_ib_port_physical_state", G, 1, "Physical port state id: 2 Polling, 3 Disabled, 5 LinkUp, 6 LinkErrorRecovery, ..."},
  {"infiniband_port", "rate", "ringside_ib_port_rate_bytes_per_second", G, 1, "Negotiated port rate (lane rate x width) in bytes per second."},
  // class/net/<if>/.
  {"netdev", "rx_bytes", "ringside_netdev_rx_bytes_total", C, 1, "Bytes received by the interface."},
  {"netdev", "tx_bytes", "ringside_netdev_tx_bytes_total", C, 1, "Bytes transmitted by the interface."},
  {"netdev", "rx_packets", "ringside_netdev_rx_packets_total", C, 1, "Packets received."},
  {"netdev", "tx_packets", "ringside_netdev_tx_packets_total", C, 1, "Packets transmitted."},
  {"netdev", "rx_errors", "ringside_netdev_rx_errors_total", C, 1, "Receive errors."},
  {"netdev", "tx_errors", "ringside_netdev_tx_errors_total", C, 1, "Transmit errors."},
  {"netdev", "rx_dropped", "ringside_netdev_rx_dropped_total", C, 1, "Received packets dropped."},
  {"netdev", "tx_dropped", "ringside_netdev_tx_dropped_total", C, 1, "Transmitted packets dropped."},
  {"netdev", "multicast", "ringside_netdev_rx_multicast_packets_total", C, 1, "Multicast packets received."},
  {"netdev", "collisions", "ringside_netdev_collisions_total", C, 1, "Collisions."},
  {"netdev", "rx_length_errors", "ringside_netdev_rx_length_errors_total", C, 1, "Received frames with a bad length."},
  {"netdev", "rx_over_errors", "ringside_netdev_rx_over_errors_total", C, 1, "Receiver ring overflows."},
  {"netdev", "rx_crc_errors", "ringside_netdev_rx_crc_errors_total", C, 1, "Received frames with a CRC error."},
  {"netdev", "rx_frame_errors", "ringside_netdev_rx_frame_errors_total", C, 1, "Received frames with an alignment error."},
  {"netdev", "rx_fifo_errors", "ringside_netdev_rx_fifo_errors_total", C, 1, "Receive FIFO errors."},
  {"netdev", "rx_missed_errors", "ringside_netdev_rx_missed_errors_total", C, 1, "Packets missed by the host."},
  {"netdev", "tx_aborted_errors", "ringside_netdev_tx_aborted_errors_total", C, 1, "Transmissions aborted."},
  {"netdev", "tx_carrier_errors", "ringside_netdev_tx_carrier_errors_total", C, 1, "Transmit carrier errors."},
  {"netdev", "tx_fifo_errors", "ringside_netdev_tx_fifo_errors_total", C, 1, "Transmit FIFO errors."},
  {"netdev", "tx_heartbeat_errors", "ringside_netdev_tx_heartbeat_errors_total", C, 1, "Transmit heartbeat errors."},
  {"netdev", "tx_window_errors", "ringside_netdev_tx_window_errors_total", C, 1, "Transmit window errors."},
  {"netdev", "rx_compressed", "ringside_netdev_rx_compressed_packets_total", C, 1, "Compressed packets received."},
  {"netdev", "tx_compressed", "ringside_netdev_tx_compressed_packets_total", C, 1, "Compressed packets transmitted."},
  {"netdev", "rx_nohandler", "ringside_netdev_rx_nohandler_packets_total", C, 1, "Packets received and dropped for lack of a protocol handler."},
  {"netdev", "*", "ringside_netdev_other_statistic_total", C, 1, "A statistics/ file not in the catalog, by its file name."},
  {"netdev", "carrier_changes", "ringside_netdev_carrier_changes_total", C, 1, "Carrier transitions, up and down (32-bit)."},
  {"netdev", "carrier_up_count", "ringside_netdev_carrier_up_total", C, 1, "Carrier transitions to up (32-bit)."},
  {"netdev", "carrier_down_count", "ringside_netdev_carrier_down_total", C, 1, "Carrier transitions to down (32-bit)."},
  {"netdev", "operstate", "ringside_netdev_operstate", G, 1, "RFC 2863 operational state id: 0 unknown, 1 notpresent, 2 down, 3 lowerlayerdown, 4 testing, 5 dormant, 6 up."},
  {"netdev", "speed", "ringside_netdev_speed_bytes_per_second", G, 1, "Link speed in bytes per second (absent when unknown or down)."},
  {"netdev", "mtu", "ringside_netdev_mtu_bytes", G, 1, "MTU in bytes."},
  // The fabric scan (libibmad PMA and PortInfo of given LIDs: switch ports and remote HCAs).
  {"ibmad", "port_rcv_data", "ringside_ib_fabric_port_received_bytes_total", C, 4, "Data octets received on the port (PMA PortRcvData x 4) (fabric scan: a remote or switch port)"},
  {"ibmad", "port_xmit_data", "ringside_ib_fabric_port_transmitted_bytes_total", C, 4, "Data octets transmitted on the port (PMA PortXmitData x 4) (fabric scan: a remote or switch port)"},
  {"ibmad", "port_rcv_packets", "ringside_ib_fabric_port_received_packets_total", C, 1, "Packets received, including packets with errors (fabric scan: a remote or switch port)"},
  {"ibmad", "port_xmit_packets", "ringside_ib_fabric_port_transmitted_packets_total", C, 1, "Packets transmitted, including packets with errors (fabric scan: a remote or switch port)"},
  {"ibmad", "unicast_rcv_packets", "ringside_ib_fabric_port_unicast_received_packets_total", C, 1, "Unicast packets received (fabric scan: a remote or switch port)"},
  {"ibmad", "unicast_xmit_packets", "ringside_ib_fabric_port_unicast_transmitted_packets_total", C, 1, "Unicast packets transmitted (fabric scan: a remote or switch port)"},
  {"ibmad", "multicast_rcv_packets", "ringside_ib_fabric_port_multicast_received_packets_total", C, 1, "Multicast packets received (fabric scan: a remote or switch port)"},
  {"ibmad", "multicast_xmit_packets", "ringside_ib_fabric_port_multicast_transmitted_packets_total", C, 1, "Multicast packets transmitted (fabric scan: a remote or switch port)"},
  {"ibmad", "symbol_error", "ringside_ib_fabric_port_symbol_errors_total", C, 1, "Minor link errors on one or more physical lanes (16-bit, saturates) (fabric scan: a remote or switch port)"},
  {"ibmad", "link_error_recovery", "ringside_ib_fabric_port_link_error_recoveries_total", C, 1, "Successful link error recoveries (retrains) (8-bit, saturates) (fabric scan: a remote or switch port)"},
  {"ibmad", "link_downed", "ringside_ib_fabric_port_link_downed_total", C, 1, "Times link error recovery failed and the link went down (8-bit, saturates) (fabric scan: a remote or switch port)"},
  {"ibmad", "port_rcv_errors", "ringside_ib_fabric_port_receive_errors_total", C, 1, "Packets received with errors (fabric scan: a remote or switch port)"},
  {"ibmad", "port_rcv_remote_physical_errors", "ringside_ib_fabric_port_receive_remote_physical_errors_total", C, 1, "Packets received marked with EBP (fabric scan: a remote or switch port)"},
  {"ibmad", "port_rcv_switch_relay_errors", "ringside_ib_fabric_port_receive_switch_relay_errors_total", C, 1, "Packets a switch could not forward (fabric scan: a remote or switch port)"},
  {"ibmad", "port_xmit_discards", "ringside_ib_fabric_port_transmit_discards_total", C, 1, "Outbound packets discarded because the port was down or congested (fabric scan: a remote or switch port)"},
  {"ibmad", "port_rcv_discards", "ringside_ib_fabric_port_receive_discards_total", C, 1, "Inbound packets discarded (driver-specific counter) (fabric scan: a remote or switch port)"},
  {"ibmad", "port_xmit_constraint_errors", "ringside_ib_fabric_port_transmit_constraint_errors_total", C, 1, "Outbound packets failing raw, partition or IP-version constraints (fabric scan: a remote or switch port)"},
  {"ibmad", "port_rcv_constraint_errors", "ringside_ib_fabric_port_receive_constraint_errors_total", C, 1, "Inbound packets failing raw, partition or IP-version constraints (fabric scan: a remote or switch port)"},
  {"ibmad", "local_link_integrity_errors", "ringside_ib_fabric_port_local_link_integrity_errors_total", C, 1, "Times local physical errors exceeded the LocalPhyErrors threshold (4-bit, saturates) (fabric scan: a remote or switch port)"},
  {"ibmad", "excessive_buffer_overrun_errors", "ringside_ib_fabric_port_excessive_buffer_overrun_errors_total", C, 1, "Consecutive flow-control periods with an input buffer overrun (4-bit, saturates) (fabric scan: a remote or switch port)"},
  {"ibmad", "VL15_dropped", "ringside_ib_fabric_port_vl15_dropped_total", C, 1, "Incoming VL15 (management) packets dropped (fabric scan: a remote or switch port)"},
  {"ibmad", "port_xmit_wait", "ringside_ib_fabric_port_transmit_wait_ticks_total", C, 1, "Ticks in which the port had data to send but sent none (device-defined tick) (fabric scan: a remote or switch port)"},
  {"ibmad", "state", "ringside_ib_fabric_port_state", G, 1, "PortInfo logical state id of a scanned port: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE."},
  {"ibmad", "phys_state", "ringside_ib_fabric_port_physical_state", G, 1, "PortInfo physical state id of a scanned port: 2 Polling, 3 Disabled, 5 LinkUp, ..."},
  {"info", "ibmad_node", "ringside_ib_fabric_node_info", G, 1, "A node the fabric scan reads, with its node_guid, lid, node_desc, node_type and num_ports; value 1."},
  // NVLink, through NVML (labels gpu = GPU index, link = link number).
  {"nvlink", "link_state", "ringside_nvlink_up", G, 1, "1 if the NVLink is up, 0 if down; a down link is always exported, never dropped."},
  {"nvlink", "replay_errors", "ringside_nvlink_replay_errors_total", C, 1, "Data-link transmit replays on the NVLink (pre-Blackwell counter)."},
  {"nvlink", "recovery_errors", "ringside_nvlink_recovery_errors_total", C, 1, "Data-link transmit recoveries (link retrains) on the NVLink (pre-Blackwell counter)."},
  {"nvlink", "crc_flit_errors", "ringside_nvlink_crc_flit_errors_total", C, 1, "Received flow-control digits (flits) with a CRC error (pre-Blackwell counter)."},
  {"nvlink", "crc_data_errors", "ringside_nvlink_crc_data_errors_total", C, 1, "Received data with a CRC error (pre-Blackwell counter)."},
  {"nvlink", "recovery_events", "ringside_nvlink_recovery_events_total", C, 1, "Transitions of the link from up into recovery (Blackwell and later)."},
  {"nvlink", "recovery_successful_events", "ringside_nvlink_recovery_successful_events_total", C, 1, "Recoveries after which the link came back (Blackwell and later)."},
  {"nvlink", "recovery_failed_events", "ringside_nvlink_recovery_failed_events_total", C, 1, "Recoveries after which the link was declared down (Blackwell and later)."},
  {"nvlink", "symbol_errors", "ringside_nvlink_symbol_errors_total", C, 1, "Symbol errors forward error correction could not correct (Blackwell and later)."},
  {"nvlink", "effective_errors", "ringside_nvlink_effective_errors_total", C, 1, "Errors left after forward error correction (Blackwell and later)."},
  {"nvlink", "effective_ber", "ringside_nvlink_effective_bit_error_ratio", G, 1, "Bit-error ratio after forward error correction (Blackwell and later; decoded from NVML's packed form)."},
  {"nvlink", "symbol_ber", "ringside_nvlink_symbol_bit_error_ratio", G, 1, "Symbol bit-error ratio (Blackwell and later; decoded from NVML's packed form)."},
  // SIOCETHTOOL driver statistics (or `ethtool -S` dumps), by the driver's names; per-priority names
  // are matched as templates (rx_prio<N>_pause) and carry a `priority` label.
  {"ethtool", "rx_prio<N>_pause", "ringside_pfc_rx_pause_frames_total", C, 1, "PFC pause frames received on the priority: the peer stopped this port sending."},
  {"ethtool", "tx_prio<N>_pause", "ringside_pfc_tx_pause_frames_total", C, 1, "PFC pause frames sent on the priority: this port could not absorb its traffic (a possible storm origin)."},
  {"ethtool", "rx_prio<N>_pause_duration", "ringside_pfc_rx_pause_duration_seconds_total", C, 1e-6, "Time the port was paused by its peer on the priority and could not send."},
  {"ethtool", "tx_prio<N>_pause_duration", "ringside_pfc_tx_pause_duration_seconds_total", C, 1e-6, "Time the port paused its peer on the priority."},
  {"ethtool", "rx_prio<N>_pause_transition", "ringside_pfc_rx_pause_transitions_total", C, 1, "XOFF to XON transitions of received pause on the priority."},
  {"ethtool", "rx_prio<N>_bytes", "ringside_ethtool_priority_rx_bytes_total", C, 1, "Bytes received on the priority."},
  {"ethtool", "rx_prio<N>_packets", "ringside_ethtool_priority_rx_packets_total", C, 1, "Packets received on the priority."},
  {"ethtool", "tx_prio<N>_bytes", "ringside_ethtool_priority_tx_bytes_total", C, 1, "Bytes transmitted on the priority."},
  {"ethtool", "tx_prio<N>_packets", "ringside_ethtool_priority_tx_packets_total", C, 1, "Packets transmitted on the priority."},
  {"ethtool", "rx_prio<N>_discards", "ringside_ethtool_priority_rx_discards_total", C, 1, "Packets of the priority dropped for lack of receive buffers."},
  {"ethtool", "rx_prio<N>_buf_discard", "ringside_ethtool_priority_rx_buffer_discards_total", C, 1, "Packets of the priority dropped for lack of per-host buffer."},
  {"ethtool", "rx_prio<N>_cong_discard", "ringside_ethtool_priority_rx_congestion_discards_total", C, 1, "Packets of the priority dropped because of per-host congestion."},
  {"ethtool", "rx_prio<N>_marked", "ringside_ethtool_priority_rx_ecn_marked_packets_total", C, 1, "Packets of the priority ECN-marked by the device because of per-host congestion."},
  {"ethtool", "rx_global_pause", "ringside_ethtool_rx_global_pause_frames_total", C, 1, "802.3x global pause frames received."},
  {"ethtool", "tx_global_pause", "ringside_ethtool_tx_global_pause_frames_total", C, 1, "802.3x global pause frames sent."},
  {"ethtool", "rx_global_pause_duration", "ringside_ethtool_rx_global_pause_duration_seconds_total", C, 1e-6, "Time the port was paused by global pause."},
  {"ethtool", "tx_global_pause_duration", "ringside_ethtool_tx_global_pause_duration_seconds_total", C, 1e-6, "Time the port paused its peer with global pause."},
  {"ethtool", "rx_global_pause_transition", "ringside_ethtool_rx_global_pause_transitions_total", C, 1, "XOFF to XON transitions of received global pause."},
  {"ethtool", "rx_pause_ctrl_phy", "ringside_ethtool_rx_pause_control_frames_total", C, 1, "Link-layer pause control frames received (global and PFC)."},
  {"ethtool", "tx_pause_ctrl_phy", "ringside_ethtool_tx_pause_control_frames_total", C, 1, "Link-layer pause control frames sent (global and PFC)."},
  {"ethtool", "tx_pause_storm_warning_events", "ringside_ethtool_tx_pause_storm_warning_events_total", C, 1, "Times the port sent pauses for a long period (PFC storm warning)."},
  {"ethtool", "tx_pause_storm_error_events", "ringside_ethtool_tx_pause_storm_error_events_total", C, 1, "Times the port paused so long that it stopped sending pauses (drops possible)."},
  {"ethtool", "link_down_events_phy", "ringside_ethtool_link_down_events_total", C, 1, "Times the port's operational state went down (the NIC's own flap counter)."},
  {"ethtool", "rx_discards_phy", "ringside_ethtool_rx_discards_phy_total", C, 1, "Packets dropped for lack of receive buffers (the adapter is congested)."},
  {"ethtool", "tx_discards_phy", "ringside_ethtool_tx_discards_phy_total", C, 1, "Packets discarded on transmit: link down, head-of-line blocking or pauses from the network."},
  {"ethtool", "rx_out_of_buffer", "ringside_ethtool_rx_out_of_buffer_drops_total", C, 1, "Packets dropped because a receive queue had no software buffers."},
  {"ethtool", "rx_pcs_symbol_err_phy", "ringside_ethtool_rx_pcs_symbol_errors_total", C, 1, "Symbols forward error correction could not correct."},
  {"ethtool", "rx_corrected_bits_phy", "ringside_ethtool_rx_corrected_bits_total", C, 1, "Bits corrected by forward error correction."},
  {"ethtool", "rx_bits_phy", "ringside_ethtool_rx_bits_total", C, 1, "Bits received at the PHY, where the driver has it (MLNX_OFED; upstream mlx5 does not emit rx_bits_phy). Without it the BER denominator is link speed x time."},
  {"ethtool", "rx_crc_errors_phy", "ringside_ethtool_rx_crc_errors_phy_total", C, 1, "Frames received with a CRC error at the PHY."},
  {"ethtool", "*", "ringside_ethtool_other_statistic_total", C, 1, "A driver statistic not in the catalog, by its name (exported only with --ethtool-all-metrics)."},
  // GPU signals (collectors/nvml/gpu_signals.h) and host signals (collectors/host/).
  {"gpu", "clock_event_reasons", "ringside_gpu_clock_event_reasons", G, 1, "The GPU's current clock event (throttle) reasons: NVML's raw bitmask (0x1 idle, 0x4 SW power cap, 0x8 HW slowdown, 0x20 SW thermal, 0x40 HW thermal, 0x80 HW power brake; unknown bits kept)."},
  {"gpu", "sm_clock_mhz", "ringside_gpu_sm_clock_hertz", G, 1e6, "Current SM clock."},
  {"gpu", "sm_clock_max_mhz", "ringside_gpu_sm_clock_max_hertz", G, 1e6, "Highest SM clock the GPU supports (read once at discovery)."},
  {"gpu", "temperature_c", "ringside_gpu_temperature_celsius", G, 1, "GPU core temperature."},
  {"gpu", "power_mw", "ringside_gpu_power_watts", G, 0.001, "Power draw (a one-second average on Ampere and newer)."},
  {"gpu", "power_limit_mw", "ringside_gpu_power_limit_watts", G, 0.001, "Power limit the GPU enforces (the lowest of the limits set)."},
  {"gpu", "utilization_gpu_percent", "ringside_gpu_utilization_ratio", G, 0.01, "Share of the last sample period in which a kernel ran on the GPU."},
  {"gpu", "pcie_link_gen", "ringside_gpu_pcie_link_generation", G, 1, "Current PCIe link generation (may drop while the GPU idles)."},
  {"gpu", "pcie_link_gen_max", "ringside_gpu_pcie_link_max_generation", G, 1, "Highest PCIe generation possible with this GPU and system (read once at discovery)."},
  {"gpu", "pcie_link_width", "ringside_gpu_pcie_link_width_lanes", G, 1, "Current PCIe link width."},
  {"gpu", "pcie_link_width_max", "ringside_gpu_pcie_link_max_width_lanes", G, 1, "Widest PCIe link possible (read once at discovery)."},
  {"gpu", "throttle_power_cap_ns", "ringside_gpu_throttle_power_cap_seconds_total", C, 1e-9, "Time the GPU's clocks were held down by the software power cap (normal under full load; read every --nvml-slow-interval)."},
  {"gpu", "throttle_sw_thermal_ns", "ringside_gpu_throttle_sw_thermal_seconds_total", C, 1e-9, "Time the clocks were held down to keep the GPU or its memory under their operating temperature (read every --nvml-slow-interval)."},
  {"gpu", "throttle_hw_thermal_ns", "ringside_gpu_throttle_hw_thermal_seconds_total", C, 1e-9, "Time in hardware thermal slowdown: clocks cut by half or more because the GPU ran too hot (read every --nvml-slow-interval)."},
  {"gpu", "throttle_hw_power_brake_ns", "ringside_gpu_throttle_hw_power_brake_seconds_total", C, 1e-9, "Time in hardware power brake slowdown, asserted from outside the GPU (e.g. by the power supply) (read every --nvml-slow-interval)."},
  {"gpu", "ecc_uncorrected_volatile", "ringside_gpu_ecc_uncorrected_errors_total", C, 1, "Uncorrectable ECC errors since the driver loaded (read every --nvml-slow-interval)."},
  {"gpu", "remap_pending", "ringside_gpu_row_remap_pending", G, 1, "1 when a memory row remapping waits for the next GPU reset (read every --nvml-slow-interval)."},
  {"gpu", "remap_failure", "ringside_gpu_row_remap_failure", G, 1, "1 when a memory row remapping failed: the GPU should be drained (read every --nvml-slow-interval)."},
  {"gpu", "pcie_replay", "ringside_gpu_pcie_replays_total", C, 1, "PCIe replays of the GPU's link (non-zero on healthy GPUs: watch the rate; read every --nvml-slow-interval)."},
  {"gpu", "compute_processes", "ringside_gpu_compute_processes", G, 1, "Compute processes running on the GPU (more than one: ranks share it; read every --nvml-slow-interval)."},
  {"gpu", "xid_events", "ringside_gpu_xid_events_total", C, 1, "XID errors the GPU reported since the agent started (each also streamed to the aggregator at once)."},
  {"gpu", "last_xid", "ringside_gpu_last_xid", G, 1, "The latest XID the GPU reported (absent until the first)."},
  {"host", "cpu_pressure_some_us", "ringside_host_cpu_pressure_some_seconds_total", C, 1e-6, "Time some runnable task waited for a CPU (PSI)."},
  {"host", "cpu_pressure_full_us", "ringside_host_cpu_pressure_full_seconds_total", C, 1e-6, "Time all non-idle tasks waited for a CPU (PSI; Linux 5.13 and later)."},
  {"host", "memory_pressure_some_us", "ringside_host_memory_pressure_some_seconds_total", C, 1e-6, "Time some task stalled on memory (reclaim, swap-in, thrashing) (PSI)."},
  {"host", "memory_pressure_full_us", "ringside_host_memory_pressure_full_seconds_total", C, 1e-6, "Time all non-idle tasks stalled on memory at once (PSI)."},
  {"host", "io_pressure_some_us", "ringside_host_io_pressure_some_seconds_total", C, 1e-6, "Time some task waited for I/O (PSI)."},
  {"host", "io_pressure_full_us", "ringside_host_io_pressure_full_seconds_total", C, 1e-6, "Time all non-idle tasks waited for I/O at once (PSI)."},
  {"cgroup", "nr_periods", "ringside_cgroup_cpu_periods_total", C, 1, "CPU quota enforcement periods of a rank's cgroup (the cgroups the NCCL plugins report)."},
  {"cgroup", "nr_throttled", "ringside_cgroup_cpu_throttled_periods_total", C, 1, "Periods in which the rank's cgroup used up its CPU quota and was throttled."},
  {"cgroup", "throttled_usec", "ringside_cgroup_cpu_throttled_seconds_total", C, 1e-6, "Time the rank's cgroup was throttled by its CPU quota."},
  {"cgroup", "usage_usec", "ringside_cgroup_cpu_usage_seconds_total", C, 1e-6, "CPU time the rank's cgroup used."},
  // LLDP, from lldpd (collectors/lldp, docs/lldp.md).
  {"lldp", "neighbors", "ringside_lldp_neighbors", G, 1, "LLDP neighbours lldpd knows on the netdev (0: none, or lost)."},
  {"lldp", "neighbor_changes", "ringside_lldp_neighbor_changes_total", C, 1, "Times the netdev's LLDP neighbour changed (another switch or port, lost, back) since the agent started."},
  // Info families (value 1) and the agent's own health.
  {"info", "infiniband_device", "ringside_ib_device_info", G, 1, "An RDMA device with its hca_type, firmware_version, board_id and node_guid; value 1."},
  {"info", "infiniband_port", "ringside_ib_port_info", G, 1, "An RDMA port with its link_layer and RoCE netdev; value 1."},
  {"info", "gpu", "ringside_gpu_info", G, 1, "A GPU seen through NVML with its uuid, name, pci_bus_id (NVML's spelling), pci_bus_id_sysfs (the Linux form, as collective records carry it), architecture, driver_version, nvlink_count, nvlink_error_api and clocks_event_reasons_api; value 1."},
  {"info", "gpu_processes", "ringside_gpu_processes_info", G, 1, "The pids (as the node numbers them, comma-separated) of the compute processes on a GPU that has any; value 1."},
  {"info", "ethtool_caps", "ringside_ethtool_capabilities_info", G, 1, "The pause, storm, discard and ECN counters the NIC reports, and its pause configuration, as labels; value 1."},
  {"info", "lldp", "ringside_lldp_neighbor_info", G, 1, "A netdev's LLDP neighbour with its chassis_id, chassis_name, port_id, port_descr, mgmt_addr, pvid and vlans as lldpd reports them; value 1."},
  {"info", "netdev", "ringside_netdev_info", G, 1, "A network interface with its RDMA device and port where it has one; value 1."},
  {"info", "link_transitions", "ringside_link_transitions_total", C, 1, "Link state transitions seen by an event source (netlink carrier/operstate, verbs port events, polled port state attributes), by direction (to=up|down), each stamped as it arrived."},
  {"self", "link_events_evicted", "ringside_link_events_evicted_total", C, 1, "Link events pushed out of the agent's bounded event ring before they were read."},
  {"self", "netlink_overflows", "ringside_agent_netlink_overflows_total", C, 1, "Times the netlink link-event socket overflowed (ENOBUFS: notifications lost), each answered with a resync dump."},
  {"self", "netlink_dump_errors", "ringside_agent_netlink_resync_dump_errors_total", C, 1, "Resync dumps the kernel refused with NLMSG_ERROR (e.g. EBUSY), requested again."},
  {"self", "netlink_vanished", "ringside_agent_netlink_vanished_links_total", C, 1, "Interfaces forgotten because a complete resync dump no longer listed them (deleted while notifications were lost)."},
  {"self", "netlink_rcvbuf", "ringside_agent_netlink_receive_buffer_bytes", G, 1, "Receive buffer the kernel granted the netlink link-event socket."},
  {"self", "netlink_rcvbuf_capped", "ringside_agent_netlink_receive_buffer_capped", G, 1, "1 when the netlink receive buffer is smaller than asked (capped by net.core.rmem_max without CAP_NET_ADMIN)."},
  {"self", "verbs_removals", "ringside_agent_verbs_device_removals_total", C, 1, "RDMA devices closed because their async event fd failed (POLLERR/EIO: unplug, driver reload, firmware reset)."},
  {"self", "verbs_reopens", "ringside_agent_verbs_device_reopens_total", C, 1, "RDMA devices reopened after a removal, when they came back."},
  {"self", "port_state_ports", "ringside_agent_port_state_watch_ports", G, 1, "InfiniBand/RoCE ports whose state attribute is polled every --link_state_interval for link transitions."},
  {"self", "port_state_failures", "ringside_agent_port_state_watch_read_failures_total", C, 1, "Failed reads of a polled port state attribute (its device removed, or the file unreadable)."},
  {"self", "build", "ringside_agent_build_info", G, 1, "The agent's version; value 1."},
  {"self", "cycles", "ringside_agent_cycles_total", C, 1, "Sampling cycles run."},
  {"self", "overruns", "ringside_agent_cycle_overruns_total", C, 1, "Sampling slots missed because a cycle took longer than the interval."},
  {"self", "early_cycles", "ringside_agent_early_cycles_total", C, 1, "Sampling cycles run ahead of the schedule because a watched link error counter moved (--early_cycle_on_errors); at most one per interval."},
  {"self", "last_cycle", "ringside_agent_last_cycle_timestamp_seconds", G, 1, "When the latest sampling cycle started (Unix time)."},
  {"self", "duration", "ringside_agent_collector_duration_seconds", G, 1, "Wall time of the collector's latest cycle."},
  {"self", "read_errors", "ringside_agent_collector_read_errors_total", C, 1, "Failed reads or unparsable values, per collector."},
  {"self", "up", "ringside_agent_collector_up", G, 1, "1 if the collector's source is there; 0 and a reason (not_found: no library or device, unimplemented: a missing entry point, ...) if it is off."},
  {"self", "series", "ringside_agent_collector_series", G, 1, "Series the collector currently reads."},
  // The collective-record listener (NCCL profiler plugins on this node; daemon/agent/collective_listener.h).
  {"self", "collective_records", "ringside_agent_collective_records_total", C, 1, "Collective records received from NCCL profiler plugins on this node and forwarded upstream, per job."},
  {"self", "collective_drops", "ringside_agent_collective_drops_total", C, 1, "Collective records the plugins reported dropped (no agent, slow agent, full ring), per job."},
  {"self", "collective_rate_limited", "ringside_agent_collective_rate_limited_records_total", C, 1, "Collective records this agent dropped because a plugin connection exceeded its rate limit, per job."},
  {"self", "collective_connections_total", "ringside_agent_collective_connections_total", C, 1, "Plugin connections accepted on the collective-record socket."},
  {"self", "collective_connections", "ringside_agent_collective_connections", G, 1, "Plugin connections open on the collective-record socket."},
  {"self", "collective_rejections", "ringside_agent_collective_rejections_total", C, 1, "Plugin connections cut off or refused, by reason: bad_magic, bad_version, bad_length, oversized, truncated, bad_string, bad_value, too_many_connections."},
  {"self", "upload_connected", "ringside_agent_upload_connected", G, 1, "1 while a stream session to the aggregator is open and past its handshake, else 0."},
  {"self", "upload_sessions", "ringside_agent_upload_sessions_total", C, 1, "Stream sessions to the aggregator that completed their handshake (HelloAck)."},
  {"self", "upload_defs_by_reference", "ringside_agent_upload_definitions_by_reference_total", C, 1, "Sessions whose series definitions the aggregator already held (the Hello named them by digest), so that none was sent."},
  {"self", "upload_reconnects", "ringside_agent_upload_reconnects_total", C, 1, "Stream sessions opened after the first (after an error, a watchdog or the aggregator closing)."},
  {"self", "upload_sent", "ringside_agent_upload_messages_sent_total", C, 1, "Messages written to the stream, resends included (type=hello|series_defs|samples|collectives|link_events)."},
  {"self", "upload_resent", "ringside_agent_upload_messages_resent_total", C, 1, "Sequenced messages written again after a reconnect because the aggregator had not acknowledged them."},
  {"self", "upload_enqueued", "ringside_agent_upload_messages_enqueued_total", C, 1, "Sequenced messages put in the upload buffer (type=samples|collectives|link_events)."},
  {"self", "upload_dropped", "ringside_agent_upload_dropped_total", C, 1, "Messages lost from the full upload buffer: oldest sample batches first. Exact: a message dropped after it was written to the stream counts only once it is known not to have arrived (see upload_drop_pending_records)."},
  {"self", "upload_dropped_records", "ringside_agent_upload_dropped_records_total", C, 1, "Sample values, collective records or link events in the lost messages."},
  {"self", "upload_drop_pending", "ringside_agent_upload_drop_pending_records", G, 1, "Records in messages dropped from the full buffer after being written to the stream, whose fate is not known yet: the next acknowledgement (delivered) or the next session's resend (lost, counted in upload_dropped_records) settles it."},
  {"self", "upload_drop_delivered", "ringside_agent_upload_drop_delivered_records_total", C, 1, "Records in messages dropped from the full buffer after being written to the stream that reached the aggregator anyway (what the socket buffers held arrived when the link returned)."},
  {"self", "upload_bytes", "ringside_agent_upload_sent_bytes_total", C, 1, "Encoded bytes of the messages written to the stream."},
  {"self", "upload_acked_seq", "ringside_agent_upload_acked_seq", G, 1, "Highest sequence number the aggregator acknowledged (this agent epoch)."},
  {"self", "upload_sent_seq", "ringside_agent_upload_sent_seq", G, 1, "Highest sequence number sent; minus the acked one, what is in flight."},
  {"self", "upload_buffer_bytes", "ringside_agent_upload_buffer_bytes", G, 1, "Memory held by unacknowledged messages."},
  {"self", "upload_buffer_messages", "ringside_agent_upload_buffer_messages", G, 1, "Unacknowledged messages held in the upload buffer."},
  {"self", "upload_buffer_capacity", "ringside_agent_upload_buffer_capacity_bytes", G, 1, "Size of the upload buffer (--upload-buffer)."},
  {"self", "upload_link_events_missed", "ringside_agent_upload_link_events_missed_total", C, 1, "Link events pushed out of the agent's event ring before the uploader forwarded them."},
  {"self", "upload_series", "ringside_agent_upload_series", G, 1, "Series ids assigned for upload (stable per series for the agent's lifetime)."},
  {"self", "upload_session_ends", "ringside_agent_upload_session_ends_total", C, 1, "Stream sessions that ended, by reason: closed (by the aggregator), a gRPC status code (unavailable, failed_precondition, permission_denied, unauthenticated, ...), version_mismatch, hello_timeout, write_timeout, ack_timeout, protocol_error."},
  {"self", "upload_last_session_end", "ringside_agent_upload_last_session_end_timestamp_seconds", G, 1, "When a session last ended for this reason (Unix time)."},
  // Shard placement (--shard-map; daemon/agent/shard_placement.h).
  {"self", "shard_info", "ringside_agent_shard_info", G, 1, "The aggregator shard this node's counters and link events go to, with the key it was placed by (placed_by=leaf:<id>|node:<name>) and the --shard-placement mode; value 1."},
  {"self", "shard_moves", "ringside_agent_shard_moves_total", C, 1, "Times this node moved to another shard because its discovered leaf switch changed (recabling, or LLDP naming a leaf after the start)."},
});
// clang-format on

}  // namespace

std::span<const MetricSpec> MetricCatalog() { return kCatalog; }

const MetricSpec* FindMetricSpec(absl::string_view source, absl::string_view counter) {
  const MetricSpec* fallback = nullptr;
  for (const MetricSpec& m : kCatalog) {
    if (m.source != source) continue;
    if (m.counter == counter) return &m;
    if (m.counter == "*") fallback = &m;
  }
  return fallback;
}

const MetricSpec& AgentFamily(absl::string_view name) {
  for (const MetricSpec& m : kCatalog) {
    if ((m.source == "self" || m.source == "info") && m.name == name) return m;
  }
  std::fprintf(stderr, "ringside: metric %.*s is not in the catalog\n",
               static_cast<int>(name.size()), name.data());
  std::abort();  // a programming error caught by every test that exports metrics
}

prometheus::MetricFamily AgentMetricFamily(absl::string_view name) {
  const MetricSpec& spec = AgentFamily(name);
  prometheus::MetricFamily f;
  f.name = std::string(spec.name);
  f.help = std::string(spec.help);
  f.type = spec.type == MetricType::kCounter ? prometheus::MetricType::Counter
                                             : prometheus::MetricType::Gauge;
  return f;
}

}  // namespace ringside::daemon
