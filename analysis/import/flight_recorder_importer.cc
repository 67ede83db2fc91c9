#include "analysis/import/flight_recorder_importer.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "analysis/import/gzip_source.h"

namespace ringside::analysis {
namespace {

using Json = nlohmann::json;
using ringside::v1::CollectiveRecord;

// The member `key` of object `obj`, or nullptr when absent or null (the JSON dump writes 0 and
// the pickle dump None for an absent time; a converted pickle has null).
const Json* Member(const Json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

bool IntMember(const Json& obj, const char* key, int64_t* out) {
  const Json* v = Member(obj, key);
  if (v == nullptr || !v->is_number_integer()) return false;
  *out = v->get<int64_t>();
  return true;
}

// "[0, 1, 2]" (the dump's pg_config ranks) or a JSON list → global ranks; nullopt if unreadable.
std::optional<std::vector<int64_t>> ParseRanks(const Json& v) {
  std::vector<int64_t> ranks;
  if (v.is_array()) {
    for (const Json& r : v) {
      if (!r.is_number_integer()) return std::nullopt;
      ranks.push_back(r.get<int64_t>());
    }
    return ranks;
  }
  if (!v.is_string()) return std::nullopt;
  absl::string_view s = absl::StripAsciiWhitespace(v.get_ref<const std::string&>());
  if (s.size() < 2 || s.front() != '[' || s.back() != ']') return std::nullopt;
  s = s.substr(1, s.size() - 2);
  if (absl::StripAsciiWhitespace(s).empty()) return ranks;
  for (absl::string_view part : absl::StrSplit(s, ',')) {
    int64_t r = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &r)) return std::nullopt;
    ranks.push_back(r);
  }
  return ranks;
}

// Trailing digits of the base name without extensions: "nccl_trace_rank_12" → 12.
std::optional<int64_t> RankFromName(absl::string_view name) {
  size_t slash = name.rfind('/');
  if (slash != absl::string_view::npos) name = name.substr(slash + 1);
  for (bool again = true; again;) {
    again = false;
    for (absl::string_view ext : {".gz", ".json", ".pkl", ".pickle"}) {
      if (name.size() > ext.size() && absl::EndsWithIgnoreCase(name, ext)) {
        name.remove_suffix(ext.size());
        again = true;
      }
    }
  }
  size_t i = name.size();
  while (i > 0 && absl::ascii_isdigit(static_cast<unsigned char>(name[i - 1]))) --i;
  int64_t r = 0;
  if (i == name.size() || name.size() - i > 9 || !absl::SimpleAtoi(name.substr(i), &r)) {
    return std::nullopt;
  }
  return r;
}

// "nccl:send 0->1" → 1, "nccl:recv 1<-0" → 0 (ranks in the process group); -1 otherwise.
int32_t P2pPeer(absl::string_view profiling_name) {
  size_t sp = profiling_name.find(' ');
  if (sp == absl::string_view::npos) return -1;
  absl::string_view arrow = profiling_name.substr(sp + 1);
  for (absl::string_view sep : {"->", "<-"}) {
    size_t at = arrow.find(sep);
    int32_t peer = 0;
    if (at != absl::string_view::npos &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(arrow.substr(at + 2)), &peer) && peer >= 0) {
      return peer;
    }
  }
  return -1;
}

struct ProcessGroup {
  std::vector<int64_t> ranks;
};

// Sum over tensors of numel x element size; 0 when any size or dtype is unknown.
uint64_t TensorBytes(const Json* sizes, const Json* dtypes) {
  if (sizes == nullptr || dtypes == nullptr || !sizes->is_array() || !dtypes->is_array() ||
      sizes->size() != dtypes->size()) {
    return 0;
  }
  uint64_t total = 0;
  for (size_t i = 0; i < sizes->size(); ++i) {
    const Json& shape = (*sizes)[i];
    const Json& dtype = (*dtypes)[i];
    if (!shape.is_array() || !dtype.is_string()) return 0;
    uint64_t numel = 1;
    for (const Json& d : shape) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) return 0;
      numel *= static_cast<uint64_t>(d.get<int64_t>());
    }
    int b = DtypeBytes(dtype.get_ref<const std::string&>());
    if (b == 0) return 0;
    total += numel * static_cast<uint64_t>(b);
  }
  return total;
}

enum class StateRank { kScheduled = 0, kStarted = 1, kCompleted = 2 };

struct Converted {
  CollectiveRecord rec;
  bool p2p = false;
  int64_t op_id = 0;
  StateRank state = StateRank::kScheduled;
  int64_t global_rank = 0;
  int32_t peer = -1;
  std::string incomplete;  // why it did not complete; "" when it did
};

class DumpReader {
 public:
  DumpReader(const FlightRecorderOptions& opt, ImportResult& result) : opt_(opt), result_(result) {}

  absl::Status Read(const FlightRecorderDump& dump, std::vector<Converted>& out) {
    MaybeGzipSource src(dump.source);
    absl::StatusOr<std::string> text = ReadAll(src, opt_.max_dump_bytes);
    if (!text.ok()) {
      return absl::Status(text.status().code(),
                          absl::StrCat(dump.name, ": ", text.status().message()));
    }
    if (!text->empty() && static_cast<unsigned char>((*text)[0]) == 0x80) {
      return absl::InvalidArgumentError(absl::StrCat(
          dump.name,
          ": this is a Python pickle (the Flight Recorder's default dump format); convert it to "
          "JSON first (docs/importers.md): python3 -c 'import json,pickle,sys; "
          "json.dump(pickle.load(open(sys.argv[1],\"rb\")),sys.stdout,default=str)' FILE > "
          "FILE.json"));
    }
    Json doc;
    try {
      doc = Json::parse(*text);
    } catch (const Json::exception& e) {
      return absl::DataLossError(absl::StrCat(dump.name, ": not valid JSON: ", e.what()));
    }
    try {
      return Convert(dump, doc, out);
    } catch (const Json::exception& e) {  // a type check missed below: never crash
      return absl::DataLossError(absl::StrCat(dump.name, ": ", e.what()));
    }
  }

 private:
  absl::Status Convert(const FlightRecorderDump& dump, const Json& doc,
                       std::vector<Converted>& out) {
    if (!doc.is_object() || (!doc.contains("entries") && !doc.contains("pg_config"))) {
      return absl::InvalidArgumentError(
          absl::StrCat(dump.name,
                       ": not a Flight Recorder dump (expected an object with \"entries\" and "
                       "\"pg_config\")"));
    }
    if (const Json* v = Member(doc, "version"); v != nullptr) {
      std::string version = v->is_string() ? v->get<std::string>() : v->dump();
      if (!absl::StartsWith(version, "2.")) {
        return absl::InvalidArgumentError(
            absl::StrCat(dump.name, ": Flight Recorder format version ", version,
                         " is not supported (this importer reads 2.x)"));
      }
    }
    int64_t global_rank = 0;
    if (dump.rank.has_value()) {
      global_rank = *dump.rank;
    } else if (IntMember(doc, "rank", &global_rank)) {
    } else if (std::optional<int64_t> r = RankFromName(dump.name); r.has_value()) {
      global_rank = *r;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(dump.name,
                       ": cannot tell the global rank of this dump: the Flight Recorder names "
                       "its dumps <prefix><rank>; rename it so, or give the rank explicitly"));
    }
    if (global_rank < 0) {
      return absl::InvalidArgumentError(absl::StrCat(dump.name, ": negative rank"));
    }

    std::map<std::string, ProcessGroup> groups;
    if (const Json* cfg = Member(doc, "pg_config"); cfg != nullptr && cfg->is_object()) {
      for (const auto& [pg_name, info] : cfg->items()) {
        const Json* ranks = info.is_object() ? Member(info, "ranks") : nullptr;
        std::optional<std::vector<int64_t>> parsed;
        if (ranks != nullptr) parsed = ParseRanks(*ranks);
        if (!parsed.has_value()) {
          result_.stats.notes.push_back(
              absl::StrCat(dump.name, ": pg_config[\"", pg_name, "\"] has no readable ranks"));
          continue;
        }
        groups[pg_name].ranks = std::move(*parsed);
      }
    }

    const Json* entries = Member(doc, "entries");
    ++result_.stats.inputs;
    if (entries == nullptr) {
      result_.stats.notes.push_back(absl::StrCat(dump.name, ": no entries (nothing recorded)"));
      return absl::OkStatus();
    }
    if (!entries->is_array()) {
      return absl::DataLossError(absl::StrCat(dump.name, ": \"entries\" is not a list"));
    }
    for (size_t i = 0; i < entries->size(); ++i) {
      std::string why = ConvertEntry(dump, (*entries)[i], global_rank, groups, out);
      if (why.empty()) continue;
      std::string msg = absl::StrCat(dump.name, ": entries[", i, "]: ", why);
      if (!opt_.skip_malformed) return absl::DataLossError(msg);
      ++result_.stats.malformed;
      if (result_.stats.malformed_examples.size() < 10) {
        result_.stats.malformed_examples.push_back(msg);
      }
    }
    return absl::OkStatus();
  }

  // Returns why the entry is malformed, or "" after taking it in (as a record or as skipped).
  std::string ConvertEntry(const FlightRecorderDump& dump, const Json& e, int64_t global_rank,
                           std::map<std::string, ProcessGroup>& groups,
                           std::vector<Converted>& out) {
    if (!e.is_object()) return "not an object";
    const Json* name_v = Member(e, "profiling_name");
    if (name_v == nullptr || !name_v->is_string()) return "profiling_name missing or not a string";
    const std::string& profiling_name = name_v->get_ref<const std::string&>();
    // "nccl:send 0->1" counts as "nccl:send".
    std::string type(profiling_name.substr(0, profiling_name.find(' ')));
    int64_t created = 0;
    if (!IntMember(e, "time_created_ns", &created) || created < 0) {
      return "time_created_ns missing or not a non-negative integer";
    }
    std::string pg_name, pg_desc;
    if (const Json* pg = Member(e, "process_group");
        pg != nullptr && pg->is_array() && !pg->empty() && (*pg)[0].is_string()) {
      pg_name = (*pg)[0].get<std::string>();
      if (pg->size() > 1 && (*pg)[1].is_string()) pg_desc = (*pg)[1].get<std::string>();
    } else if (pg != nullptr && pg->is_string()) {
      pg_name = pg->get<std::string>();
    } else {
      int64_t pg_id = 0;
      if (!IntMember(e, "pg_id", &pg_id)) return "neither process_group nor pg_id";
      pg_name = std::to_string(pg_id);
    }
    std::string state = "scheduled";
    if (const Json* s = Member(e, "state"); s != nullptr) {
      if (!s->is_string()) return "state is not a string";
      state = s->get<std::string>();
      if (state != "scheduled" && state != "started" && state != "completed") {
        return absl::StrCat("unknown state \"", state.substr(0, 40), "\"");
      }
    }
    bool retired = false;
    if (const Json* r = Member(e, "retired"); r != nullptr && r->is_boolean())
      retired = r->get<bool>();
    std::optional<double> duration_ms;
    if (const Json* d = Member(e, "duration_ms"); d != nullptr) {
      if (!d->is_number() || !std::isfinite(d->get<double>()) || d->get<double>() < 0) {
        return "duration_ms is not a non-negative number";
      }
      duration_ms = d->get<double>();
    }
    int64_t started_ns = 0, completed_ns = 0;
    IntMember(e, "time_discovered_started_ns", &started_ns);
    IntMember(e, "time_discovered_completed_ns", &completed_ns);

    ++result_.stats.rows;
    ++result_.stats.rows_by_type[type];
    const std::string function = FlightRecorderFunction(profiling_name);
    if (function.empty()) {
      ++result_.stats.skipped[absl::StrCat("unknown operation (", type, ")")];
      return "";
    }
    bool p2p = function == "Send" || function == "Recv";
    if (const Json* v = Member(e, "is_p2p"); v != nullptr && v->is_boolean()) p2p = v->get<bool>();
    if (p2p && !opt_.include_p2p) {
      ++result_.stats
            .skipped[absl::StrCat("point-to-point (", type, "), imported only with include_p2p")];
      return "";
    }
    int64_t seq = 0;
    if (!IntMember(e, p2p ? "p2p_seq_id" : "collective_seq_id", &seq) || seq < 0) {
      return absl::StrCat(p2p ? "p2p_seq_id" : "collective_seq_id",
                          " missing or not a non-negative integer");
    }

    Converted c;
    c.p2p = p2p;
    c.peer = P2pPeer(profiling_name);
    c.global_rank = global_rank;
    IntMember(e, "op_id", &c.op_id);
    c.state = state == "completed" ? StateRank::kCompleted
              : state == "started" ? StateRank::kStarted
                                   : StateRank::kScheduled;
    CollectiveRecord& rec = c.rec;
    rec.set_job_id(opt_.job_id);
    const std::string comm = pg_desc.empty() ? pg_name : absl::StrCat(pg_name, ":", pg_desc);
    rec.set_comm_name(comm);
    rec.set_comm_id(ImportedCommId(opt_.job_id, pg_name));
    int64_t comm_rank = -1;
    if (auto g = groups.find(pg_name); g != groups.end()) {
      const std::vector<int64_t>& ranks = g->second.ranks;
      auto pos = std::find(ranks.begin(), ranks.end(), global_rank);
      if (pos != ranks.end()) comm_rank = pos - ranks.begin();
      if (comm_rank >= 0) rec.set_nranks(static_cast<uint32_t>(ranks.size()));
    }
    if (comm_rank >= 0) {
      rec.set_rank(static_cast<uint32_t>(comm_rank));
    } else {
      // No ranks for the group (an empty list means every rank): the global rank stands in.
      rec.set_rank(static_cast<uint32_t>(global_rank));
      rec.set_nranks(0);
      std::string note = absl::StrCat(
          dump.name, ": process group \"", pg_name, "\" has no rank list with rank ", global_rank,
          " in pg_config; its records carry the global rank and nranks 0");
      if (std::find(result_.stats.notes.begin(), result_.stats.notes.end(), note) ==
          result_.stats.notes.end()) {
        result_.stats.notes.push_back(note);
      }
    }
    rec.set_function(function);
    rec.set_seq(static_cast<uint64_t>(seq));
    const bool output_side = function == "ReduceScatter";
    rec.set_bytes(output_side ? TensorBytes(Member(e, "output_sizes"), Member(e, "output_dtypes"))
                              : TensorBytes(Member(e, "input_sizes"), Member(e, "input_dtypes")));
    rec.set_enqueue_unix_nanos(created);
    if (duration_ms.has_value() && c.state == StateRank::kCompleted) {
      // CUDA-event time from the kernel's start to its end (wait for peers included), placed at
      // the enqueue time: the dump has no kernel start.
      rec.set_kernel_start_unix_nanos(created);
      rec.set_kernel_stop_unix_nanos(created +
                                     static_cast<int64_t>(std::llround(*duration_ms * 1e6)));
    } else {
      // Without timing: what the watchdog saw, late by up to its polling interval; 0 when it saw
      // nothing (not started, or not completed).
      if (c.state != StateRank::kScheduled) rec.set_kernel_start_unix_nanos(started_ns);
      if (c.state == StateRank::kCompleted) rec.set_kernel_stop_unix_nanos(completed_ns);
    }
    if (c.state != StateRank::kCompleted) {
      c.incomplete = retired ? absl::StrCat("timed out (retired while ", state, ")")
                             : absl::StrCat("in flight at dump time (", state, ")");
    }
    rec.set_host(absl::StrCat("rank", global_rank));
    rec.set_clock_synchronized(false);
    out.push_back(std::move(c));
    return "";
  }

  const FlightRecorderOptions& opt_;
  ImportResult& result_;
};

}  // namespace

std::string FlightRecorderFunction(absl::string_view profiling_name) {
  absl::string_view n = profiling_name;
  size_t colon = n.find(':');
  if (colon != absl::string_view::npos) n = n.substr(colon + 1);
  n = n.substr(0, n.find(' '));
  std::string s = absl::AsciiStrToLower(n);
  auto has = [&s](absl::string_view x) { return absl::StrContains(s, x); };
  if (has("reduce_scatter") || has("reducescatter")) return "ReduceScatter";
  if (has("all_gather") || has("allgather")) return "AllGather";
  if (has("all_reduce") || has("allreduce") || has("barrier")) return "AllReduce";
  if (has("all_to_all") || has("alltoall")) return "AllToAll";
  if (has("broadcast")) return "Broadcast";
  if (has("reduce")) return "Reduce";
  if (has("gather")) return "Gather";
  if (has("scatter")) return "Scatter";
  if (s == "send") return "Send";
  if (s == "recv") return "Recv";
  if (s == "coalesced") return "Coalesced";
  return "";
}

int DtypeBytes(absl::string_view dtype) {
  static const auto* sizes = new std::map<std::string, int, std::less<>>{
      {"Bool", 1},
      {"Byte", 1},
      {"Char", 1},
      {"Short", 2},
      {"Int", 4},
      {"Long", 8},
      {"Half", 2},
      {"Float", 4},
      {"Double", 8},
      {"BFloat16", 2},
      {"ComplexHalf", 4},
      {"ComplexFloat", 8},
      {"ComplexDouble", 16},
      {"QInt8", 1},
      {"QUInt8", 1},
      {"QInt32", 4},
      {"QUInt4x2", 1},
      {"QUInt2x4", 1},
      {"UInt16", 2},
      {"UInt32", 4},
      {"UInt64", 8},
      {"Float8_e5m2", 1},
      {"Float8_e4m3fn", 1},
      {"Float8_e5m2fnuz", 1},
      {"Float8_e4m3fnuz", 1},
      {"Float8_e8m0fnu", 1},
  };
  auto it = sizes->find(dtype);
  return it == sizes->end() ? 0 : it->second;
}

absl::StatusOr<ImportResult> ImportFlightRecorder(const std::vector<FlightRecorderDump>& dumps,
                                                  const FlightRecorderOptions& options) {
  ImportResult result;
  result.stats.format = "flight-recorder";
  std::vector<Converted> all;
  DumpReader reader(options, result);
  for (const FlightRecorderDump& d : dumps) {
    if (d.source == nullptr) return absl::InvalidArgumentError(d.name + ": no source");
    if (absl::Status s = reader.Read(d, all); !s.ok()) return s;
  }
  // Dumps of one rank taken at different times overlap: keep each entry once, in its most
  // advanced state.
  std::map<std::tuple<uint64_t, int64_t, bool, uint64_t, int64_t>, size_t> seen;
  std::vector<bool> keep(all.size(), true);
  for (size_t i = 0; i < all.size(); ++i) {
    const Converted& c = all[i];
    auto key = std::make_tuple(c.rec.comm_id(), c.global_rank, c.p2p, c.rec.seq(), c.op_id);
    auto [it, fresh] = seen.emplace(key, i);
    if (fresh) continue;
    size_t& j = it->second;
    const size_t loser = all[j].state >= c.state ? i : j;
    keep[loser] = false;
    if (loser == j) j = i;
    ++result.stats.skipped["duplicate of an entry in another dump of the same rank"];
  }
  std::vector<size_t> order;
  for (size_t i = 0; i < all.size(); ++i) {
    if (keep[i]) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&all](size_t x, size_t y) {
    const CollectiveRecord& a = all[x].rec;
    const CollectiveRecord& b = all[y].rec;
    return std::make_tuple(a.enqueue_unix_nanos(), a.comm_id(), a.rank(), a.seq()) <
           std::make_tuple(b.enqueue_unix_nanos(), b.comm_id(), b.rank(), b.seq());
  });
  for (size_t i : order) {
    if (!all[i].incomplete.empty()) ++result.stats.incomplete[all[i].incomplete];
    result.records.push_back(std::move(all[i].rec));
    result.extras.push_back({all[i].global_rank, all[i].p2p ? all[i].peer : -1});
  }
  result.stats.records = static_cast<int64_t>(result.records.size());
  return result;
}

}  // namespace ringside::analysis
