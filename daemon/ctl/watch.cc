// `ringside watch`: the open incidents, then every change as it happens (WatchIncidents), one
// line each, until Ctrl-C. When the aggregator ends the stream or goes away, says so on stderr
// and reconnects with jittered exponential backoff (daemon/agent/backoff.h); after a reconnect the
// snapshot is compared with what was already shown, so only what changed meanwhile is printed.
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <set>
#include <thread>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "daemon/agent/backoff.h"
#include "daemon/common/signals.h"
#include "daemon/common/steady_time.h"
#include "daemon/ctl/fleet.h"
#include "daemon/ctl/fleet_merge.h"
#include "daemon/ctl/incident_text.h"
#include "daemon/ctl/query_client.h"
#include "daemon/ctl/query_commands.h"
#include "daemon/ctl/query_json.h"
#include "daemon/ctl/relative_time.h"

namespace ringside::daemon::ctl {
namespace {

constexpr char kName[] = "watch";

const std::vector<FlagSpec>& Specs() {
  static const auto* specs = new std::vector<FlagSpec>{
      {"kind", "", true, "KIND", "only incidents of this kind", ""},
      {"node", "", true, "NODE", "only incidents on this node", ""},
      {"job", "", true, "JOB", "only incidents of this job, or that affect it", ""},
      {"max-backoff", "", true, "DURATION", "longest wait between reconnection attempts", "30s"},
  };
  return *specs;
}

constexpr char kUsage[] =
    "Usage: ringside watch [--kind K] [--node N] [--job J]\n"
    "\n"
    "Prints every incident open now (OPEN), then each change as it happens (OPENED, UPDATED,\n"
    "RESOLVED), one line each: time of the change (UTC), type, id, severity, kind, entity and\n"
    "summary. -o json prints one JSON object per line (JSON Lines) instead.\n"
    "Runs until Ctrl-C. If the aggregator ends the stream or goes away, it says so on stderr and\n"
    "reconnects with backoff; incidents that opened, changed or resolved meanwhile are printed\n"
    "once it is back.\n"
    "With several aggregators, every one is watched (each stream reconnects on its own) and a\n"
    "change that replicas both send is printed once (same key, type and revision).\n"
    "\n"
    "Exit codes: 0 stopped with Ctrl-C (SIGINT) or SIGTERM; 2 usage error, the aggregator could\n"
    "not be reached at the start, or it refused the watch.\n";

// Signals → cancellation of the current streams (one per aggregator). Shared with the signal
// thread, which outlives the command, so it lives on the heap for the life of the process.
struct StopState {
  absl::Notification stop;
  absl::Mutex mu;
  std::set<grpc::ClientContext*> current ABSL_GUARDED_BY(mu);
};

StopState* InstallStopHandling() {
  static StopState* state = [] {
    auto* s = new StopState;
    InstallStopSignals(&s->stop);
    std::thread([s] {
      s->stop.WaitForNotification();
      absl::MutexLock l(&s->mu);
      for (grpc::ClientContext* c : s->current) c->TryCancel();
    }).detach();
    return s;
  }();
  return state;
}

bool Retryable(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::UNIMPLEMENTED:
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::FAILED_PRECONDITION:
      return false;
    default:
      return true;
  }
}

// The output of every stream: one line at a time, and, with several aggregators, each change
// once: replicas send the same change (same key, type and revision) under different ids.
class Output {
 public:
  Output(OutputFormat format, CommandContext& ctx, bool dedupe)
      : format_(format), ctx_(ctx), dedupe_(dedupe) {}

  void Change(const v1::IncidentChange& change) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock l(&mu_);
    if (dedupe_) {
      const v1::Incident& i = change.incident();
      // An initial snapshot entry and a live OPENED are the same change.
      if (!printed_.insert({IncidentIdentity(i), change.type(), i.revision()}).second) return;
    }
    if (format_ == OutputFormat::kJson) {
      WriteJsonLine(ChangeJson(change), ctx_.out);
    } else {
      ctx_.out << ChangeLine(change, absl::Now()) << "\n";
    }
    ctx_.out.flush();
  }

  void Note(const std::string& line) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock l(&mu_);
    ctx_.err << line << "\n";
    ctx_.err.flush();
  }

 private:
  absl::Mutex mu_;
  OutputFormat format_;
  CommandContext& ctx_;
  const bool dedupe_;
  std::set<std::tuple<std::string, int, uint64_t>> printed_ ABSL_GUARDED_BY(mu_);
};

// What one aggregator's stream has shown, by that aggregator's ids.
class Watcher {
 public:
  Watcher(QueryClient& client, Output& output) : client_(client), output_(output) {}

  // Prints `change` unless this revision of the incident was already shown (a snapshot after a
  // reconnect repeats what is still open; a resolution found by CatchUp comes again).
  void Show(const v1::IncidentChange& change) {
    const v1::Incident& i = change.incident();
    auto it = shown_.find(i.id());
    if (it != shown_.end() && it->second.revision == i.revision() && it->second.open == i.open()) {
      return;
    }
    shown_[i.id()] = {i.revision(), i.open()};
    output_.Change(change);
  }

  // After a reconnect: asks for each incident last shown as open, and prints the resolution of
  // those that were resolved while the stream was down (the new snapshot only has open ones).
  void CatchUp() {
    int asked = 0;
    for (auto& [id, seen] : shown_) {
      if (!seen.open) continue;
      if (++asked > kMaxCatchUp) {
        output_.Note(absl::StrCat(
            "ringside watch: more than ", kMaxCatchUp,
            " incidents were open; run `ringside incidents` for the ones resolved while "
            "disconnected"));
        break;
      }
      absl::StatusOr<v1::Incident> now = client_.GetIncident(id);
      if (!now.ok() || now->open()) continue;
      v1::IncidentChange change;
      change.set_type(v1::IncidentChange::RESOLVED);
      *change.mutable_incident() = *now;
      Show(change);
    }
  }

 private:
  struct Seen {
    uint64_t revision = 0;
    bool open = false;
  };
  QueryClient& client_;
  Output& output_;
  static constexpr int kMaxCatchUp = 500;
  std::map<uint64_t, Seen> shown_;
};

std::string WaitText(absl::Duration d) {
  return absl::FormatDuration(absl::Trunc(d, absl::Milliseconds(10)));
}

// One aggregator's stream, reopened with backoff until a stop signal (OK) or a refusal (the
// error). `probed`: the caller's GetStatus just reached it, so the first stream opens at once.
absl::Status WatchOne(QueryClient& client, const v1::WatchIncidentsRequest& req,
                      const BackoffOptions& bo, bool probed, Output& output, StopState* stop) {
  const std::string& target = client.options().target;
  Watcher watcher(client, output);
  Backoff backoff(bo);
  bool skip_probe = probed;
  bool streamed = false;  // a stream was open before: the next one is a reconnect
  while (!stop->stop.HasBeenNotified()) {
    if (!skip_probe) {
      // A unary call first: it says whether the aggregator is there (and why not) within the
      // deadline, which an idle stream cannot.
      absl::StatusOr<v1::ClusterStatus> probe = client.GetStatus();
      if (!probe.ok()) {
        const absl::Duration wait = backoff.Next();
        output.Note(absl::StrCat("ringside watch: ", probe.status().message(), "; retrying in ",
                                 WaitText(wait)));
        daemon::WaitForNotificationSteady(stop->stop, wait);
        continue;
      }
      output.Note(
          absl::StrCat("ringside watch: ", streamed ? "reconnected" : "connected", " to ", target));
    }
    skip_probe = false;

    grpc::ClientContext call;
    {
      absl::MutexLock l(&stop->mu);
      if (stop->stop.HasBeenNotified()) break;
      stop->current.insert(&call);
    }
    std::unique_ptr<grpc::ClientReader<v1::IncidentChange>> reader =
        client.stub().WatchIncidents(&call, req);
    const absl::Time started = absl::Now();
    if (streamed) watcher.CatchUp();
    v1::IncidentChange change;
    bool received = false;
    while (reader->Read(&change)) {
      received = true;
      watcher.Show(change);
    }
    grpc::Status status = reader->Finish();
    {
      absl::MutexLock l(&stop->mu);
      stop->current.erase(&call);
    }
    if (stop->stop.HasBeenNotified()) break;
    if (!status.ok() && !Retryable(status.error_code())) return client.Explain(status);
    streamed = true;
    // A stream that worked for a while starts the backoff over; one that ends at once does not.
    if (received || absl::Now() - started > absl::Seconds(10)) backoff.Reset();
    const absl::Duration wait = backoff.Next();
    output.Note(absl::StrCat("ringside watch: the aggregator at ", target, " ended the stream (",
                             status.ok() ? "closed" : client.Explain(status).message(),
                             "); reconnecting in ", WaitText(wait)));
    daemon::WaitForNotificationSteady(stop->stop, wait);
  }
  return absl::OkStatus();
}

}  // namespace

int RunWatch(const std::vector<std::string>& argv, CommandContext& ctx) {
  // Before any gRPC thread exists, so that only the signal thread sees SIGINT and SIGTERM.
  StopState* stop = InstallStopHandling();
  QueryInvocation q;
  if (auto code = PrepareQueryCommand(kName, kUsage, Specs(), argv, ctx, q)) return *code;
  if (!q.args.positional.empty()) {
    return FailCommand(
        ctx, kName,
        absl::StrCat("unexpected argument \"", q.args.positional[0], "\" (see --help)"));
  }
  BackoffOptions bo;
  bo.initial = absl::Milliseconds(250);
  if (q.args.Has("max-backoff")) {
    absl::StatusOr<absl::Duration> d = ParsePositiveDuration(q.args.Get("max-backoff"));
    if (!d.ok()) {
      return FailCommand(ctx, kName, absl::StrCat("--max-backoff: ", d.status().message()));
    }
    bo.max = *d;
    bo.initial = std::min(bo.initial, bo.max);
  }
  v1::WatchIncidentsRequest req;
  req.set_kind(q.args.Get("kind"));
  req.set_node(q.args.Get("node"));
  req.set_job(q.args.Get("job"));

  Fleet& fleet = *q.fleet;
  // Every aggregator is probed first: when none answers, that is the error; one that does not
  // is a warning, and its stream keeps trying in the background.
  std::vector<absl::StatusOr<v1::ClusterStatus>> probes =
      fleet.All<v1::ClusterStatus>([](QueryClient& c) { return c.GetStatus(); });
  std::vector<absl::Status> statuses;
  std::vector<std::string> reached;
  for (size_t i = 0; i < probes.size(); ++i) {
    statuses.push_back(probes[i].status());
    if (probes[i].ok()) reached.push_back(fleet.target(i));
  }
  if (absl::Status s = SortOutFailures(statuses, reached.size(), false, ctx.err); !s.ok()) {
    return FailCommand(ctx, kName, std::string(s.message()));
  }
  Output output(q.format, ctx, /*dedupe=*/fleet.many());
  output.Note(absl::StrCat("ringside watch: watching incidents at ", absl::StrJoin(reached, ", "),
                           " (Ctrl-C to stop)"));

  std::vector<absl::Status> ended(fleet.size());
  std::vector<std::thread> streams;
  for (size_t i = 0; i < fleet.size(); ++i) {
    streams.emplace_back([&, i] {
      ended[i] = WatchOne(fleet.at(i), req, bo, probes[i].ok(), output, stop);
      if (!ended[i].ok() && fleet.many()) {
        output.Note(absl::StrCat("ringside: warning: ", ended[i].message()));
      }
    });
  }
  for (std::thread& t : streams) t.join();
  if (!stop->stop.HasBeenNotified()) {
    // Every stream was refused.
    std::vector<std::string> why;
    for (const absl::Status& s : ended) {
      if (!s.ok()) why.push_back(std::string(s.message()));
    }
    return FailCommand(ctx, kName, absl::StrJoin(why, "; "));
  }
  output.Note("ringside watch: stopped");
  ctx.out.flush();
  return kExitOk;
}

}  // namespace ringside::daemon::ctl
