// The fuzzed entry points (issue #18): one function per parser of untrusted bytes, shared by the
// libFuzzer targets (fuzzer_main.cc, clang with RINGSIDE_FUZZ=ON) and the corpus replay test that
// runs in every build (corpus_replay_test.cc). Each takes arbitrary bytes, never crashes on them,
// aborts when a parser breaks one of its own promises (so the fuzzer reports it), and returns
// whether the input was accepted.
#ifndef RINGSIDE_TESTS_FUZZ_FUZZ_ENTRIES_H_
#define RINGSIDE_TESTS_FUZZ_FUZZ_ENTRIES_H_

#include <cstddef>
#include <cstdint>

namespace ringside::fuzz {

// The aggregator's ingest path for one session: the input is a sequence of length-prefixed
// (2 bytes, little-endian) serialized ringside.v1.AgentMessage. The first one is the session's
// Hello when it is one (else a fixed valid Hello opens the session and it is applied); each later
// one is parsed (an unparseable one ends the stream, as gRPC would) and applied to an IngestCore
// until one is refused. Accepted: every message parsed and applied with OK.
bool IngestSession(const uint8_t* data, size_t size);

// The admission path's in-place SeriesDefs reader (daemon/aggregator/ingest/series_defs_view.h):
// the input is one serialized AgentMessage. When the reader takes it, protobuf must parse the
// same bytes to the same definitions (ids, names, kinds, widths, flags), counts and info records,
// and the reader must stop exactly at the first definition the ingest checks refuse. Accepted:
// the reader took it and every definition is well formed.
bool SeriesDefsWire(const uint8_t* data, size_t size);
bool SampleBatchWire(const uint8_t* data, size_t size);

// The agent's collective socket: the input is the byte stream one plugin connection sends. Frames
// are cut with DecodeBatchHeader and decoded with DecodeFrame (as the listener does), and the
// whole input also goes through DecodeFrameToProto. A decoded frame must re-encode to the very
// same bytes (the format is canonical). Accepted: at least one frame and every byte consumed.
bool CollectiveStream(const uint8_t* data, size_t size);

// The sysfs attribute parsers (collectors/common/parse.h) on the same text. Accepted: any of
// ParseUint64, ParseInt64, ParseIdAndName, ParseIbRateBytesPerSecond took it.
bool SysfsText(const uint8_t* data, size_t size);

// analysis::Topology::Parse (auto-detected format), then its lookups on every parsed host.
// Accepted: Parse returned OK.
bool TopologyText(const uint8_t* data, size_t size);

// collectors::ParseEthtoolText (`ethtool -S` captures), which never fails. Accepted: no
// malformed line and no "ERROR: <errno>" line.
bool EthtoolText(const uint8_t* data, size_t size);

// The SIOCETHTOOL string-set and stats protocol (collectors/ethtool/ethtool_ioctl.h) against a
// fake kernel the input scripts: each ioctl the collector makes takes its answer from the next
// input bytes (an errno or a reply: the set's size, its 32-byte name slots, its u64 values, the
// pause flags; writing no more than the caller's buffer holds, and EFAULT past it as the guard
// page would). The names then go through the name classifiers of ethtool_names.h. Accepted: a
// non-empty string set was read and one GetStats answered with its values.
bool EthtoolIoctl(const uint8_t* data, size_t size);

// Netlink link messages (collectors/netlink/link_watcher.h): the input is a sequence of
// datagrams, each [u8 op][u16 length LE][bytes]; every datagram goes through ParseLinkMessages,
// and all of them, in order, to a NetlinkLinkWatcher adopted on one end of a socketpair (the
// entry is the kernel), with op bit 0 = an overflow (ENOBUFS) before it and bit 1 = a Tick after
// it. Accepted: at least one link message parsed and none malformed.
bool NetlinkLink(const uint8_t* data, size_t size);

// MAD field decoding (collectors/ibmad/mad_fields.h): [u8 reply kind][u16 PMA capability mask
// LE][u8 use_extended] and the reply's attribute data (zero-padded to a MAD). Kinds: 0 NodeInfo,
// 1 PortInfo, 2 PortCounters, 3 PortCountersExtended, 4 NodeDescription, 5 ClassPortInfo.
// Accepted: the four header bytes are there and the reply is plausible (a known node type with
// ports, known port states; counters and descriptions always).
bool MadFields(const uint8_t* data, size_t size);

// Journal recovery (daemon/aggregator/journal/journal.h ReadJournal) of segment files holding arbitrary
// bytes, through an in-memory JournalFileSystem: [u8 flags] then the segment; flag bit 0 = fix
// every frame's CRC first (so mutations reach the record decoder), bit 1 = cut the rest into two
// segments at its middle. Accepted: no segment ended in a torn or corrupt frame and every payload
// parsed.
bool JournalSegment(const uint8_t* data, size_t size);

// The trace importers (analysis/import): [u8 flags] then the trace; flag bit 0 = straggler-
// analysis CSV (else a Flight Recorder JSON dump), bit 1 = skip_malformed, bit 2 = include_p2p,
// bit 3 = (Flight Recorder) two dumps, rank 0 and rank 1, split at the first 0x1e byte.
// Accepted: the import returned OK.
bool TraceImport(const uint8_t* data, size_t size);

// Detection thresholds (analysis/detection_options.h): [u8 flags] then the text; flag bit 0 =
// ParseDetectionAssignments ("name=value,..."), else ParseDetectionConfig (lines of
// "name = value"; the aggregator's --detect-config file is not YAML). Accepted: parsed OK.
bool DetectionConfig(const uint8_t* data, size_t size);

// Simulator scenario YAML (sim/scenario.h ParseScenario), then FillDefaultExpectations.
// Accepted: parsed OK.
bool ScenarioYaml(const uint8_t* data, size_t size);

}  // namespace ringside::fuzz

#endif  // RINGSIDE_TESTS_FUZZ_FUZZ_ENTRIES_H_
