#include "daemon/ctl/record_output.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"

namespace ringside::daemon::ctl {
namespace {

using ringside::v1::CollectiveRecord;

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  q += '"';
  return q;
}

// A table with left-aligned columns, two spaces apart.
class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void Print(std::ostream& out, const std::string& indent = "  ") const {
    std::vector<size_t> w;
    for (const auto& r : rows_) {
      if (w.size() < r.size()) w.resize(r.size(), 0);
      for (size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], r[i].size());
    }
    for (const auto& r : rows_) {
      std::string line = indent;
      for (size_t i = 0; i < r.size(); ++i) {
        line += r[i];
        if (i + 1 < r.size()) line += std::string(w[i] - r[i].size() + 2, ' ');
      }
      out << line << "\n";
    }
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

std::string Ms(double ms) { return absl::StrFormat("%.3f", ms); }

// Wall-clock times as RFC 3339; a trace's own clock (small values) as seconds.
std::string Time(int64_t unix_nanos) {
  if (unix_nanos > int64_t{1000000000} * 86400 * 365) {  // after 1971: a real wall clock
    return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixNanos(unix_nanos),
                            absl::UTCTimeZone());
  }
  return absl::StrFormat("%.3f s", static_cast<double>(unix_nanos) / 1e9);
}

}  // namespace

void WriteJsonLines(const std::vector<CollectiveRecord>& records, std::ostream& out) {
  google::protobuf::util::JsonPrintOptions opt;
  opt.preserve_proto_field_names = true;
  opt.always_print_primitive_fields = true;
  std::string line;
  for (const CollectiveRecord& r : records) {
    line.clear();
    (void)google::protobuf::util::MessageToJsonString(r, &line, opt);
    out << line << "\n";
  }
}

void WriteCsv(const std::vector<CollectiveRecord>& records, std::ostream& out) {
  out << "job_id,comm_id,comm_name,rank,nranks,function,seq,bytes,algorithm,protocol,channels,"
         "kernel_start_unix_nanos,kernel_stop_unix_nanos,enqueue_unix_nanos,pid,host,"
         "clock_synchronized\n";
  for (const CollectiveRecord& r : records) {
    out << CsvField(r.job_id()) << ',' << r.comm_id() << ',' << CsvField(r.comm_name()) << ','
        << r.rank() << ',' << r.nranks() << ',' << CsvField(r.function()) << ',' << r.seq() << ','
        << r.bytes() << ',' << CsvField(r.algorithm()) << ',' << CsvField(r.protocol()) << ','
        << r.channels() << ',' << r.kernel_start_unix_nanos() << ',' << r.kernel_stop_unix_nanos()
        << ',' << r.enqueue_unix_nanos() << ',' << r.pid() << ',' << CsvField(r.host()) << ','
        << (r.clock_synchronized() ? "true" : "false") << "\n";
  }
}

void WriteSummary(const analysis::ImportStats& stats, const analysis::RecordSummary& s,
                  std::ostream& out) {
  out << "Imported " << stats.format << ": " << stats.inputs
      << (stats.inputs == 1 ? " input, " : " inputs, ") << stats.rows << " rows, " << s.records
      << " collective records";
  if (!s.jobs.empty()) out << " (job " << absl::StrJoin(s.jobs, ", ") << ")";
  out << "\n";
  if (s.records > 0) {
    out << "Time range: " << Time(s.first_start_unix_nanos) << " .. "
        << Time(s.last_stop_unix_nanos) << "\n";
  }

  out << "\nRows by type in the source:\n";
  Table rows({"TYPE", "ROWS"});
  for (const auto& [type, n] : stats.rows_by_type) rows.Add({type, absl::StrCat(n)});
  rows.Print(out);
  if (!stats.skipped.empty()) {
    out << "\nRows without a record:\n";
    Table skipped({"REASON", "ROWS"});
    for (const auto& [why, n] : stats.skipped) skipped.Add({why, absl::StrCat(n)});
    skipped.Print(out);
  }

  out << "\nCommunicators:\n";
  Table comms({"JOB", "COMMUNICATOR", "NRANKS", "RANKS SEEN", "RECORDS", "FUNCTIONS"});
  for (const auto& c : s.comms) {
    comms.Add({c.job_id, c.comm_name, absl::StrCat(c.nranks), absl::StrCat(c.ranks_seen),
               absl::StrCat(c.records), absl::StrJoin(c.functions, ",")});
  }
  comms.Print(out);

  out << "\nFunctions (duration = kernel stop - start, wait for peers included):\n";
  Table fns({"FUNCTION", "RECORDS", "INSTANCES", "INCOMPLETE", "P50 MS", "P95 MS", "MAX MS"});
  std::set<std::string> names;
  for (const auto& f : s.functions) {
    names.insert(f.function);
    fns.Add({f.function, absl::StrCat(f.records), absl::StrCat(f.instances),
             absl::StrCat(f.incomplete), Ms(f.duration.p50_ms), Ms(f.duration.p95_ms),
             Ms(f.duration.max_ms)});
  }
  fns.Print(out);

  out << "\nWorkers (median duration in ms by function):\n";
  std::vector<std::string> header = {"WORKER", "RECORDS"};
  header.insert(header.end(), names.begin(), names.end());
  Table workers(header);
  for (const auto& w : s.workers) {
    std::vector<std::string> row = {w.host.empty() ? "(no host)" : w.host, absl::StrCat(w.records)};
    for (const std::string& fn : names) {
      auto it = w.by_function.find(fn);
      row.push_back(it == w.by_function.end() ? "-" : Ms(it->second.p50_ms));
    }
    workers.Add(std::move(row));
  }
  workers.Print(out);

  if (!stats.incomplete.empty()) {
    out << "\nDid not complete (kept, with kernel_stop 0):\n";
    Table inc({"WHY", "RECORDS"});
    for (const auto& [why, n] : stats.incomplete) inc.Add({why, absl::StrCat(n)});
    inc.Print(out);
  }
  if (stats.malformed > 0) {
    out << "\nMalformed rows skipped: " << stats.malformed << "\n";
    for (const std::string& e : stats.malformed_examples) out << "  " << e << "\n";
  }
  if (!stats.notes.empty()) {
    out << "\nNotes:\n";
    for (const std::string& n : stats.notes) out << "  " << n << "\n";
  }
}

}  // namespace ringside::daemon::ctl
