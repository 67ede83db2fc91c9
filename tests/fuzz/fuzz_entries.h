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

}  // namespace ringside::fuzz

#endif  // RINGSIDE_TESTS_FUZZ_FUZZ_ENTRIES_H_
