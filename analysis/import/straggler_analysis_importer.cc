#include "analysis/import/straggler_analysis_importer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "analysis/import/gzip_source.h"
#include "analysis/import/line_reader.h"

namespace ringside::analysis {
namespace {

using ringside::v1::CollectiveRecord;

// The source's operation types that become records.
enum class OpKind {
  kOther,               // compute, optimizer, gc: not a communication
  kReduceScatter,       // grads-reduce-scatter: data-parallel peers of a stage
  kAllGather,           // params-all-gather: data-parallel peers of a stage
  kEmbeddingAllReduce,  // embedding-grads-all-reduce: first and last stage of one dp_rank
  kLayernormAllReduce,  // layernorm-grads-all-reduce: the worker's tensor-parallel group
  kForwardSend,         // to stage + 1
  kForwardRecv,         // from stage - 1
  kBackwardSend,        // to stage - 1
  kBackwardRecv,        // from stage + 1
};

OpKind KindOf(absl::string_view optype) {
  static const auto* kinds = new std::map<std::string, OpKind, std::less<>>{
      {"grads-reduce-scatter", OpKind::kReduceScatter},
      {"params-all-gather", OpKind::kAllGather},
      {"embedding-grads-all-reduce", OpKind::kEmbeddingAllReduce},
      {"layernorm-grads-all-reduce", OpKind::kLayernormAllReduce},
      {"forward-send", OpKind::kForwardSend},
      {"forward-recv", OpKind::kForwardRecv},
      {"backward-send", OpKind::kBackwardSend},
      {"backward-recv", OpKind::kBackwardRecv},
  };
  auto it = kinds->find(optype);
  return it == kinds->end() ? OpKind::kOther : it->second;
}

bool IsP2p(OpKind k) {
  return k == OpKind::kForwardSend || k == OpKind::kForwardRecv || k == OpKind::kBackwardSend ||
         k == OpKind::kBackwardRecv;
}

// Operation types of the format that are known and produce no record.
bool IsKnownNonCommunication(absl::string_view optype) {
  return optype == "forward-compute" || optype == "backward-compute" || optype == "optimizer" ||
         optype == "optimizer-clip-main-grad" || optype == "gc";
}

struct Row {
  int64_t dp = 0, stage = 0, rank = 0, step = 0, seq_id = 0;
  OpKind kind = OpKind::kOther;
  std::string optype;
  double start = 0, duration = 0;
};

struct Worker {
  int64_t dp = 0, stage = 0;
  int64_t line = 0;
};

constexpr const char* kRequired[] = {"dp_rank", "stage",    "rank",     "step",
                                     "optype",  "start_ts", "duration", "seq_id"};
enum Col { kDp, kStage, kRank, kStep, kOptype, kStart, kDuration, kSeqId, kNumCols };

absl::string_view CleanField(absl::string_view f) {
  f = absl::StripAsciiWhitespace(f);
  if (f.size() >= 2 && f.front() == '"' && f.back() == '"') f = f.substr(1, f.size() - 2);
  return f;
}

bool ParseCount(absl::string_view s, int64_t* out) { return absl::SimpleAtoi(s, out) && *out >= 0; }

class Importer {
 public:
  explicit Importer(const StragglerAnalysisOptions& o) : opt_(o) {
    job_ = o.job_id.empty() ? JobIdFromFileName(o.source_name) : o.job_id;
    result_.stats.format = "straggler-analysis";
    result_.stats.inputs = 1;
  }

  absl::StatusOr<ImportResult> Run(ByteSource& input) {
    MaybeGzipSource src(&input);
    LineReader lines(&src);
    std::string line;
    if (absl::Status s = ReadHeader(lines, line); !s.ok()) return s;
    for (;;) {
      absl::StatusOr<bool> more = lines.Next(&line);
      if (!more.ok()) {
        return absl::Status(more.status().code(),
                            absl::StrCat(opt_.source_name, ": ", more.status().message()));
      }
      if (!*more) break;
      if (absl::StripAsciiWhitespace(line).empty()) continue;
      std::string why = ParseRow(line, lines.line_number());
      if (!why.empty()) {
        std::string msg = absl::StrCat(opt_.source_name, ":", lines.line_number(), ": ", why);
        if (!opt_.skip_malformed) return absl::DataLossError(msg);
        ++result_.stats.malformed;
        if (result_.stats.malformed_examples.size() < 10) {
          result_.stats.malformed_examples.push_back(msg);
        }
      }
    }
    BuildRecords();
    return std::move(result_);
  }

 private:
  absl::Status ReadHeader(LineReader& lines, std::string& line) {
    absl::StatusOr<bool> got = lines.Next(&line);
    if (!got.ok()) {
      return absl::Status(got.status().code(),
                          absl::StrCat(opt_.source_name, ": ", got.status().message()));
    }
    if (!*got) {
      return absl::InvalidArgumentError(
          absl::StrCat(opt_.source_name, ": empty input: expected a CSV header line"));
    }
    if (absl::StartsWith(line, "\xEF\xBB\xBF")) line.erase(0, 3);  // UTF-8 byte order mark
    std::vector<absl::string_view> names = absl::StrSplit(line, ',');
    header_size_ = names.size();
    std::vector<std::string> missing;
    for (int c = 0; c < kNumCols; ++c) {
      auto it = std::find_if(names.begin(), names.end(),
                             [&](absl::string_view n) { return CleanField(n) == kRequired[c]; });
      if (it == names.end()) {
        missing.push_back(kRequired[c]);
      } else {
        col_[c] = static_cast<size_t>(it - names.begin());
      }
    }
    if (!missing.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          opt_.source_name, ":1: not a straggler-analysis trace: missing column(s) ",
          absl::StrJoin(missing, ", "), " (the header is \"", line.substr(0, 200), "\")"));
    }
    return absl::OkStatus();
  }

  // Returns why the row is malformed, or "" after taking it in.
  std::string ParseRow(const std::string& line, int64_t line_number) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ',');
    if (f.size() != header_size_) {
      return absl::StrCat(f.size(), " fields where the header has ", header_size_);
    }
    Row r;
    struct IntCol {
      Col col;
      int64_t* out;
    };
    for (IntCol ic : {IntCol{kDp, &r.dp}, IntCol{kStage, &r.stage}, IntCol{kRank, &r.rank},
                      IntCol{kStep, &r.step}, IntCol{kSeqId, &r.seq_id}}) {
      absl::string_view v = CleanField(f[col_[ic.col]]);
      if (!ParseCount(v, ic.out)) {
        return absl::StrCat(kRequired[ic.col], " \"", v.substr(0, 40),
                            "\" is not a non-negative integer");
      }
    }
    absl::string_view start = CleanField(f[col_[kStart]]);
    absl::string_view duration = CleanField(f[col_[kDuration]]);
    if (!absl::SimpleAtod(start, &r.start) || !std::isfinite(r.start) || r.start < 0 ||
        r.start > 1e9) {
      return absl::StrCat("start_ts \"", start.substr(0, 40), "\" is not a time in seconds");
    }
    if (!absl::SimpleAtod(duration, &r.duration) || !std::isfinite(r.duration) || r.duration < 0 ||
        r.duration > 1e9) {
      return absl::StrCat("duration \"", duration.substr(0, 40),
                          "\" is not a non-negative number of seconds");
    }
    if (r.step > (int64_t{1} << 40) || r.seq_id > (int64_t{1} << 20)) {
      return "step or seq_id out of range";
    }
    absl::string_view optype = CleanField(f[col_[kOptype]]);
    if (optype.empty()) return "empty optype";
    auto [w, fresh] = workers_.try_emplace(r.rank, Worker{r.dp, r.stage, line_number});
    if (!fresh && (w->second.dp != r.dp || w->second.stage != r.stage)) {
      return absl::StrCat("rank ", r.rank, " has dp_rank ", r.dp, " and stage ", r.stage,
                          ", but dp_rank ", w->second.dp, " and stage ", w->second.stage,
                          " on line ", w->second.line);
    }

    ++result_.stats.rows;
    ++result_.stats.rows_by_type[std::string(optype)];
    max_end_ = std::max(max_end_, r.start + r.duration);
    r.kind = KindOf(optype);
    if (r.kind == OpKind::kOther) {
      ++result_.stats.skipped[IsKnownNonCommunication(optype)
                                  ? absl::StrCat("not a communication (", optype, ")")
                                  : absl::StrCat("unknown optype (", optype, ")")];
      return "";
    }
    if (IsP2p(r.kind) && !opt_.include_p2p) {
      ++result_.stats
            .skipped[absl::StrCat("point-to-point (", optype, "), imported only with include_p2p")];
      return "";
    }
    r.optype = std::string(optype);
    const OpKind numbering = IsP2p(r.kind) ? OpKind::kForwardSend : r.kind;
    max_seq_[numbering] = std::max(max_seq_[numbering], r.seq_id);
    rows_.push_back(std::move(r));
    return "";
  }

  // Tensor-parallel size, when the global ranks follow rank = (stage * dp + dp_rank) * tp.
  int64_t InferTpSize() const {
    std::set<int64_t> dps;
    for (const auto& [rank, w] : workers_) dps.insert(w.dp);
    const int64_t dp_size = static_cast<int64_t>(dps.size());
    if (workers_.size() < 2) return 1;
    const int64_t lo = workers_.begin()->first, hi = workers_.rbegin()->first;
    const int64_t n = static_cast<int64_t>(workers_.size());
    if (lo != 0 || (hi - lo) % (n - 1) != 0) return 0;
    const int64_t tp = (hi - lo) / (n - 1);
    if (tp <= 0) return 0;
    for (const auto& [rank, w] : workers_) {
      if (rank != (w.stage * dp_size + w.dp) * tp) return 0;
    }
    return tp;
  }

  void BuildRecords() {
    // The trace's clock restarts at 0 every step (start_ts is seconds since the step began), and
    // only some steps were recorded: lay the recorded steps out end to end on one time line,
    // `stride` seconds apart, in step order (no holes for the steps that were not recorded, so
    // time fractions over a window of steps mean what they say).
    const double stride = std::max(1.0, std::ceil(max_end_));
    std::map<int64_t, int64_t> step_index;
    for (const auto& row : rows_) step_index.emplace(row.step, 0);
    {
      int64_t i = 0;
      for (auto& [step, index] : step_index) index = i++;
    }
    if (result_.stats.rows > 0) {
      result_.stats.notes.push_back(absl::StrCat(
          opt_.source_name, ": start_ts restarts at 0 every step; the k-th recorded step is placed "
          "at k x ", stride, " s (the longest step, rounded up) on the records' time line"));
    }
    // Communicator membership, from the rows themselves.
    std::map<int64_t, std::set<int64_t>> dp_of_stage;       // stage → dp ranks
    std::map<int64_t, std::set<int64_t>> embedding_stages;  // dp rank → stages with embedding AR
    for (const auto& [rank, w] : workers_) dp_of_stage[w.stage].insert(w.dp);
    for (const Row& r : rows_) {
      if (r.kind == OpKind::kEmbeddingAllReduce) embedding_stages[r.dp].insert(r.stage);
    }
    const int64_t tp = InferTpSize();
    bool any_layernorm = false;
    for (const Row& r : rows_) any_layernorm |= r.kind == OpKind::kLayernormAllReduce;
    if (any_layernorm) {
      result_.stats.notes.push_back(
          tp > 0 ? absl::StrCat(opt_.source_name, ": tensor-parallel size ", tp,
                                " inferred from the global ranks; layernorm all-reduces are on "
                                "each worker's tensor-parallel group, of which the trace has "
                                "one member")
                 : absl::StrCat(opt_.source_name,
                                ": the global ranks do not follow (stage*dp + dp_rank)*tp; "
                                "layernorm all-reduces get nranks 0 (unknown)"));
    }
    auto index_in = [](const std::set<int64_t>& s, int64_t v) {
      return static_cast<uint32_t>(std::distance(s.begin(), s.find(v)));
    };

    std::vector<std::pair<CollectiveRecord, RecordExtras>> out;
    out.reserve(rows_.size());
    for (const Row& r : rows_) {
      CollectiveRecord rec;
      rec.set_job_id(job_);
      std::string comm;
      uint32_t comm_rank = 0, nranks = 0;
      std::string function;
      const int64_t per_step = max_seq_[IsP2p(r.kind) ? OpKind::kForwardSend : r.kind] + 1;
      uint64_t seq = static_cast<uint64_t>(r.step * per_step + r.seq_id);
      switch (r.kind) {
        case OpKind::kReduceScatter:
        case OpKind::kAllGather:
          comm = absl::StrCat("dp-stage", r.stage);
          comm_rank = index_in(dp_of_stage[r.stage], r.dp);
          nranks = static_cast<uint32_t>(dp_of_stage[r.stage].size());
          function = r.kind == OpKind::kReduceScatter ? "ReduceScatter" : "AllGather";
          break;
        case OpKind::kEmbeddingAllReduce:
          comm = absl::StrCat("embedding-dp", r.dp);
          comm_rank = index_in(embedding_stages[r.dp], r.stage);
          nranks = static_cast<uint32_t>(embedding_stages[r.dp].size());
          function = "AllReduce";
          break;
        case OpKind::kLayernormAllReduce:
          comm = absl::StrCat("tp-rank", r.rank);
          comm_rank = 0;  // rows are the first rank of their tensor-parallel group
          nranks = static_cast<uint32_t>(tp);
          function = "AllReduce";
          break;
        default: {  // point-to-point, on the pair (lower stage, lower stage + 1)
          const bool forward = r.kind == OpKind::kForwardSend || r.kind == OpKind::kForwardRecv;
          const bool sends = r.kind == OpKind::kForwardSend || r.kind == OpKind::kBackwardSend;
          // forward-send and backward-recv look up the pipeline; the others look down.
          const bool upper_peer = r.kind == OpKind::kForwardSend || r.kind == OpKind::kBackwardRecv;
          const int64_t lower = upper_peer ? r.stage : r.stage - 1;
          if (lower < 0 || !dp_of_stage.count(lower + 1) || !dp_of_stage.count(lower)) {
            ++result_.stats.skipped[absl::StrCat("point-to-point with no peer stage (", r.optype,
                                                 " at stage ", r.stage, ")")];
            continue;
          }
          comm = absl::StrCat("pp-dp", r.dp, "-stage", lower, "-", lower + 1);
          comm_rank = upper_peer ? 0 : 1;
          nranks = 2;
          function = sends ? "Send" : "Recv";
          // A transfer's Send and Recv share one number; forward and backward ones alternate.
          seq = seq * 2 + (forward ? 0 : 1);
          break;
        }
      }
      rec.set_comm_name(comm);
      rec.set_comm_id(ImportedCommId(job_, comm));
      rec.set_rank(comm_rank);
      rec.set_nranks(nranks);
      rec.set_function(function);
      rec.set_seq(seq);
      const double t0 = static_cast<double>(step_index[r.step]) * stride + r.start;
      const int64_t start_ns = static_cast<int64_t>(std::llround(t0 * 1e9));
      rec.set_kernel_start_unix_nanos(start_ns);
      rec.set_kernel_stop_unix_nanos(start_ns +
                                     static_cast<int64_t>(std::llround(r.duration * 1e9)));
      rec.set_host(absl::StrCat("rank", r.rank, "-dp", r.dp, "-stage", r.stage));
      rec.set_clock_synchronized(true);  // one clock for the whole job
      RecordExtras extras;
      extras.global_rank = r.rank;
      if (IsP2p(r.kind)) extras.peer = 1 - static_cast<int32_t>(comm_rank);
      out.emplace_back(std::move(rec), extras);
    }
    std::sort(out.begin(), out.end(), [](const auto& x, const auto& y) {
      const CollectiveRecord& a = x.first;
      const CollectiveRecord& b = y.first;
      return std::make_tuple(a.kernel_start_unix_nanos(), a.comm_name(), a.rank(), a.seq()) <
             std::make_tuple(b.kernel_start_unix_nanos(), b.comm_name(), b.rank(), b.seq());
    });
    result_.records.reserve(out.size());
    result_.extras.reserve(out.size());
    for (auto& [rec, extras] : out) {
      result_.records.push_back(std::move(rec));
      result_.extras.push_back(extras);
    }
    result_.stats.records = static_cast<int64_t>(result_.records.size());
  }

  const StragglerAnalysisOptions& opt_;
  std::string job_;
  ImportResult result_;
  size_t header_size_ = 0;
  size_t col_[kNumCols] = {};
  std::map<int64_t, Worker> workers_;  // global rank → position
  std::vector<Row> rows_;              // rows that become records
  std::map<OpKind, int64_t> max_seq_;  // highest seq_id per kind (p2p kinds share kForwardSend)
  double max_end_ = 0;
};

}  // namespace

absl::StatusOr<ImportResult> ImportStragglerAnalysis(ByteSource& input,
                                                     const StragglerAnalysisOptions& options) {
  Importer imp(options);
  return imp.Run(input);
}

std::string JobIdFromFileName(absl::string_view path) {
  size_t slash = path.rfind('/');
  absl::string_view base = slash == absl::string_view::npos ? path : path.substr(slash + 1);
  for (bool again = true; again;) {
    again = false;
    for (absl::string_view ext : {".gz", ".csv", ".json"}) {
      if (base.size() > ext.size() && absl::EndsWithIgnoreCase(base, ext)) {
        base.remove_suffix(ext.size());
        again = true;
      }
    }
  }
  return base.empty() ? std::string("imported") : std::string(base);
}

}  // namespace ringside::analysis
