#include "bench/shard_load.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "bench/port_series.h"
#include "daemon/common/protocol.h"
#include "daemon/common/series_set_digest.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "ringside/v1/ingest.pb.h"

namespace ringside::bench {
namespace {

constexpr char kStreamMethod[] = "/ringside.v1.Ingest/Stream";

// xorshift64: cheap per-agent randomness for counters' starting values and traffic.
uint64_t Next(uint64_t& s) {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

grpc::ByteBuffer ToByteBuffer(const std::string& bytes) {
  grpc::Slice s(bytes.data(), bytes.size());  // a copy: the buffer outlives `bytes`
  return grpc::ByteBuffer(&s, 1);
}

std::vector<uint32_t> Ids(int n) {
  std::vector<uint32_t> ids(static_cast<size_t>(n));
  for (int s = 0; s < n; ++s) ids[s] = static_cast<uint32_t>(s);
  return ids;
}

const char* CodeName(grpc::StatusCode c) {
  switch (c) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "?";
  }
}

}  // namespace

SeriesShape::SeriesShape(int n_series, bool by_reference)
    : n(n_series), encoder(Ids(n_series)) {
  steps.reserve(n);
  masks.reserve(n);
  for (int s = 0; s < n; ++s) {
    const PortSeries& ps = kPortSeries[s % kPortSeries.size()];
    const bool counter = ps.kind == ringside::v1::SERIES_KIND_COUNTER;
    steps.push_back(counter ? ps.step : 0);
    masks.push_back(ps.width == 0 || ps.width >= 64 ? ~0ull : (1ull << ps.width) - 1);
    if (!counter || ps.step == 0) ++idle;
  }
  if (n > 0) {
    ringside::v1::AgentMessage m;
    AddPortSeriesDefs(n, m.mutable_series_defs());
    if (by_reference) {
      ringside::daemon::SeriesSetDigest d;
      for (const ringside::v1::SeriesDef& def : m.series_defs().defs()) d.Add(def);
      digest = d.Finish();
      m.mutable_series_defs()->set_complete_digest(digest);
    }
    const std::string bytes = m.SerializeAsString();
    defs = grpc::Slice(bytes.data(), bytes.size());
  }
}

void LoadTotals::Notify() {
  std::lock_guard<std::mutex> l(mu);
  cv.notify_all();
}

void LoadTotals::AddFailure(const std::string& status) {
  failed.fetch_add(1);
  std::lock_guard<std::mutex> l(mu);
  ++failures[status];
  cv.notify_all();
}

std::string LoadTotals::FailureSummary() {
  std::lock_guard<std::mutex> l(mu);
  std::string out;
  for (const auto& [status, count] : failures) {
    absl::StrAppend(&out, out.empty() ? "" : "; ", count, " x ", status);
  }
  return out;
}

SimAgent::SimAgent(int index, const SeriesShape* shape, bool batches)
    : index_(index),
      shape_(shape),
      node_(absl::StrCat("shard-bench-node-", index)),
      epoch_(static_cast<uint64_t>(absl::ToUnixNanos(absl::Now())) + index),
      rng_(0x9E3779B97F4A7C15ull * (index + 1)) {
  if (!batches) return;
  // Counters as on a node that has been up for hours to weeks: traffic counters far from zero,
  // idle error counters at a small constant, states at their healthy value.
  const int64_t uptime_s = 3600 + static_cast<int64_t>(Next(rng_) % (30 * 86400));
  values_.resize(shape->n);
  for (int s = 0; s < shape->n; ++s) {
    const PortSeries& ps = kPortSeries[s % kPortSeries.size()];
    uint64_t v = ps.step;
    if (ps.kind == ringside::v1::SERIES_KIND_COUNTER) {
      v = ps.step == 0 ? Next(rng_) % 4 : ps.step * static_cast<uint64_t>(uptime_s);
      v &= shape->masks[s];
    }
    values_[s] = v;
  }
  // This node's share of the fabric's traffic: 50-150 % of the port series' steps.
  load_permille_ = 500 + static_cast<int>(Next(rng_) % 1001);
}

void SimAgent::NextBatch(int64_t ts, std::string* out) {
  // This interval's traffic: the node's share, moving by up to +-10 % from one cycle to the next.
  const uint64_t permille = static_cast<uint64_t>(load_permille_) * (900 + Next(rng_) % 201) / 1000;
  const uint64_t* steps = shape_->steps.data();
  const uint64_t* masks = shape_->masks.data();
  uint64_t* values = values_.data();
  const size_t n = values_.size();
  for (size_t s = 0; s < n; ++s) {
    if (steps[s] == 0) continue;  // idle counters and states hold their value
    values[s] = (values[s] + std::max<uint64_t>(1, steps[s] * permille / 1000)) & masks[s];
  }
  const uint64_t seq = seq_.load(std::memory_order_relaxed) + 1;
  shape_->encoder.Encode(seq, ts, values_, out);
  seq_.store(seq, std::memory_order_release);
}

AgentStream::AgentStream(LoadTotals* totals, SimAgent* agent, bool batches,
                         uint64_t resend_from_seq)
    : totals_(totals), agent_(agent), batches_(batches) {
  ringside::v1::AgentMessage h;
  h.mutable_hello()->set_node(agent->node());
  h.mutable_hello()->set_agent_epoch(agent->epoch());
  h.mutable_hello()->set_protocol_version(ringside::daemon::kProtocolVersion);
  h.mutable_hello()->set_min_protocol_version(ringside::daemon::kMinProtocolVersion);
  h.mutable_hello()->set_resend_from_seq(resend_from_seq);
  if (!agent->shape().digest.empty()) h.mutable_hello()->set_defs_digest(agent->shape().digest);
  hello_ = ToByteBuffer(h.SerializeAsString());
  acked_ = resend_from_seq > 0 ? resend_from_seq - 1 : 0;
}

void AgentStream::Start(grpc::GenericStub* stub, grpc::CompletionQueue* cq) {
  call_ = stub->PrepareCall(&ctx_, kStreamMethod, cq);
  outstanding_ = 1;  // before StartCall: its event reaches the queue's thread after this
  call_->StartCall(&start_tag_);
}

void AgentStream::Close() {
  closing_ = true;
  ctx_.TryCancel();
}

void AgentStream::OnEvent(Op op, bool ok) {
  --outstanding_;
  switch (op) {
    case kStart:
      if (!ok) {
        Broken();
        break;
      }
      Write(hello_, kHello);
      ++outstanding_;
      call_->Read(&in_, &read_tag_);
      break;
    case kWrite: {
      writing_ = false;
      if (!ok) break;  // the stream is ending: its read fails too
      if (what_ == kHello) {
        MaybeSendDefs();
      } else if (what_ == kDefs) {
        if (batches_) {
          thread_local std::string scratch;
          SendFirstBatch(&scratch);
        } else {
          MarkAdmitted();
        }
      }
      break;
    }
    case kRead: {
      if (!ok) {
        Broken();
        break;
      }
      ringside::v1::AggregatorMessage m;
      if (!grpc::SerializationTraits<ringside::v1::AggregatorMessage>::Deserialize(&in_, &m).ok()) {
        ctx_.TryCancel();  // counted as a failure: not closing
      } else if (m.has_hello_ack()) {
        hello_acked_ = true;
        defs_known_ = m.hello_ack().defs_known();
        totals_->opening.fetch_sub(1);
        totals_->Notify();
        MaybeSendDefs();
      } else if (m.has_ack()) {
        const uint64_t a = m.ack().acked_seq();
        if (a > acked_) {
          totals_->batches_acked.fetch_add(a - acked_, std::memory_order_relaxed);
          acked_ = a;
        }
        if (first_batch_written_ && a >= admit_seq_) MarkAdmitted();
      }
      ++outstanding_;
      call_->Read(&in_, &read_tag_);
      break;
    }
    case kFinish:
      finished_ = true;
      if (!hello_acked_) {
        totals_->opening.fetch_sub(1);
        totals_->Notify();
      }
      if (!closing_.load()) {
        if (!admitted_) totals_->failed_unadmitted.fetch_add(1);
        // The node's own name out, so that one cause counts once however many nodes it hit.
        totals_->AddFailure(absl::StrCat(
            CodeName(status_.error_code()), ": ",
            absl::StrReplaceAll(status_.error_message(), {{agent_->node(), "<node>"}})));
      }
      break;
  }
  MaybeDone();
}

AgentStream::TickResult AgentStream::Tick(int64_t ts, std::string* scratch) {
  if (finishing_ || !admitted_) return TickResult::kNotReady;
  if (writing_) return TickResult::kSkipped;
  agent_->NextBatch(ts, scratch);
  totals_->batches_sent.fetch_add(1, std::memory_order_relaxed);
  Write(ToByteBuffer(*scratch), kBatch);
  return TickResult::kSent;
}

void AgentStream::Write(grpc::ByteBuffer buffer, What what) {
  out_ = std::move(buffer);
  what_ = what;
  writing_ = true;
  ++outstanding_;
  call_->Write(out_, &write_tag_);
}

void AgentStream::MaybeSendDefs() {
  if (!hello_acked_ || defs_sent_ || writing_ || finishing_) return;  // a write's event returns here
  defs_sent_ = true;
  if (agent_->shape().n == 0 || defs_known_) {
    if (batches_) {
      thread_local std::string scratch;
      SendFirstBatch(&scratch);
    } else {
      MarkAdmitted();
    }
    return;
  }
  Write(grpc::ByteBuffer(&agent_->shape().defs, 1), kDefs);  // a reference to the shared slice
}

void AgentStream::SendFirstBatch(std::string* scratch) {
  agent_->NextBatch(absl::ToUnixNanos(absl::Now()), scratch);
  admit_seq_ = agent_->seq();
  first_batch_written_ = true;
  totals_->batches_sent.fetch_add(1, std::memory_order_relaxed);
  Write(ToByteBuffer(*scratch), kBatch);
}

void AgentStream::MarkAdmitted() {
  if (admitted_) return;
  admitted_ = true;
  totals_->admitted.fetch_add(1);
  totals_->Notify();
}

void AgentStream::Broken() {
  if (finishing_) return;
  finishing_ = true;
  ++outstanding_;
  call_->Finish(&status_, &finish_tag_);
}

void AgentStream::MaybeDone() {
  if (!finished_ || outstanding_ > 0 || done_.load(std::memory_order_relaxed)) return;
  done_.store(true, std::memory_order_release);
  totals_->done.fetch_add(1);
  totals_->Notify();
}

AdmissionResult Admit(LoadTotals& totals, Fleet& fleet, Driver& driver, int grpc_port, bool batches,
                      int window, absl::Duration timeout) {
  const int n = static_cast<int>(fleet.agents.size());
  window = std::max(1, window);
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + timeout;
  const int64_t admitted0 = totals.admitted.load();
  const int64_t failed0 = totals.failed.load();
  const int64_t unadmitted0 = totals.failed_unadmitted.load();
  AdmissionResult r;
  for (int a = 0; a < n; ++a) {
    {
      std::unique_lock<std::mutex> l(totals.mu);
      if (!totals.cv.wait_until(l, absl::ToChronoTime(deadline),
                                [&] { return totals.opening.load() < window; })) {
        r.timed_out = true;
        break;
      }
    }
    // One connection per agent, as real agents have: the channel argument that differs keeps gRPC
    // from sharing one subchannel between them. Keepalive as the real agent's uploader.
    grpc::ChannelArguments args;
    args.SetInt("ringside.bench.agent", a);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30'000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10'000);
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);  // as the agent (daemon/agent/uploader.cc)
    args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
    auto channel = grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", grpc_port),
                                             grpc::InsecureChannelCredentials(), args);
    SimAgent* agent = fleet.agents[a].get();
    const uint64_t seq = agent->seq();
    fleet.stubs.push_back(std::make_unique<grpc::GenericStub>(channel));
    fleet.streams.push_back(
        std::make_unique<AgentStream>(&totals, agent, batches, seq > 0 ? seq + 1 : 0));
    totals.opening.fetch_add(1);
    fleet.streams.back()->Start(fleet.stubs.back().get(), driver.queue_for(a));
  }
  const int opened = static_cast<int>(fleet.streams.size());
  {
    std::unique_lock<std::mutex> l(totals.mu);
    // Every stream either admitted or ended before it was.
    if (!totals.cv.wait_until(l, absl::ToChronoTime(deadline), [&] {
          return (totals.admitted.load() - admitted0) +
                     (totals.failed_unadmitted.load() - unadmitted0) >=
                 opened;
        })) {
      r.timed_out = true;
    }
  }
  r.wall_s = absl::ToDoubleSeconds(absl::Now() - start);
  r.admitted = totals.admitted.load() - admitted0;
  r.failed = totals.failed.load() - failed0;
  if (opened < n) r.timed_out = true;
  return r;
}

bool CloseAll(LoadTotals& totals, Fleet& fleet) {
  for (auto& s : fleet.streams) s->Close();
  std::unique_lock<std::mutex> l(totals.mu);
  // Streams that failed before are done already; every stream's end notifies.
  const bool ok = totals.cv.wait_for(l, std::chrono::seconds(60), [&] {
    return std::all_of(fleet.streams.begin(), fleet.streams.end(),
                       [](const std::unique_ptr<AgentStream>& s) { return s->done(); });
  });
  l.unlock();
  if (!ok) return false;
  fleet.streams.clear();
  fleet.stubs.clear();
  return true;
}

Driver::Driver(int threads) {
  for (int t = 0; t < std::max(1, threads); ++t) workers_.push_back(std::make_unique<Worker>());
  for (size_t t = 0; t < workers_.size(); ++t) {
    Worker* w = workers_[t].get();
    w->thread = std::thread([this, w, t] { Run(w, static_cast<int>(t)); });
  }
}

Driver::~Driver() {
  StopPacing();
  for (auto& w : workers_) w->cq.Shutdown();
  for (auto& w : workers_) w->thread.join();
}

void Driver::StartPacing(Fleet* fleet, LoadTotals* totals, double rate) {
  fleet_ = fleet;
  totals_ = totals;
  rate_ = rate;
  start_ = absl::Now();
  pacing_.store(true);
}

void Driver::SetWindow(absl::Time start, absl::Time end) {
  window_start_ns_ = absl::ToUnixNanos(start);
  window_end_ns_ = absl::ToUnixNanos(end);
}

void Driver::StopPacing() {
  if (!pacing_.exchange(false)) return;
  // A thread that begins an iteration after this sees pacing off; once it has begun a second
  // one, the first (which stops pacing and adds up its CPU) is over and no Tick runs.
  for (auto& w : workers_) {
    const uint64_t l0 = w->loops.load();
    while (w->loops.load() < l0 + 2) absl::SleepFor(absl::Milliseconds(1));
  }
  stopped_ = absl::Now();
}

void Driver::Run(Worker* self, int t) {
  const int p = static_cast<int>(workers_.size());
  std::string scratch;
  bool was_pacing = false;
  int n = 0;
  int a = t;
  int64_t k = 0;
  absl::Duration period;
  double cpu0 = 0;
  for (;;) {
    self->loops.fetch_add(1);
    absl::Time deadline = absl::Now() + absl::Milliseconds(5);  // notices pacing's start and end
    const bool pacing = pacing_.load();
    if (pacing && !was_pacing) {
      was_pacing = true;
      n = static_cast<int>(fleet_->streams.size());
      period = absl::Seconds(1.0 / rate_);
      a = t;
      k = 0;
      cpu0 = ThreadCpuSeconds();
    } else if (!pacing && was_pacing) {
      was_pacing = false;
      self->cpu_s += ThreadCpuSeconds() - cpu0;
    }
    if (pacing && t < n) {
      const absl::Time now = absl::Now();
      for (;;) {
        const absl::Time due = start_ + period * k + period * ((a + 0.5) / n);
        if (due > now) {
          deadline = std::min(deadline, due);
          break;
        }
        const int64_t due_ns = absl::ToUnixNanos(due);
        const AgentStream::TickResult r = fleet_->streams[a]->Tick(due_ns, &scratch);
        if (r == AgentStream::TickResult::kSkipped) totals_->skipped.fetch_add(1);
        if (due_ns >= window_start_ns_.load(std::memory_order_relaxed) &&
            due_ns < window_end_ns_.load(std::memory_order_relaxed)) {
          ++self->due;
          if (r == AgentStream::TickResult::kSent) {
            ++self->sent;
            self->lag_us.push_back(absl::ToInt64Microseconds(now - due));
          } else if (r == AgentStream::TickResult::kSkipped) {
            ++self->skipped;
          } else {
            ++self->not_ready;
          }
        }
        a += p;
        if (a >= n) {
          a = t;
          ++k;
        }
      }
    }
    void* tag = nullptr;
    bool ok = false;
    const grpc::CompletionQueue::NextStatus st =
        self->cq.AsyncNext(&tag, &ok, absl::ToChronoTime(deadline));
    if (st == grpc::CompletionQueue::SHUTDOWN) break;
    if (st == grpc::CompletionQueue::GOT_EVENT) {
      AgentStream::Tag* tg = static_cast<AgentStream::Tag*>(tag);
      tg->stream->OnEvent(tg->op, ok);
    }
  }
}

Driver::Stats Driver::stats() const {
  Stats s;
  for (const auto& w : workers_) {
    s.due += w->due;
    s.sent += w->sent;
    s.skipped += w->skipped;
    s.not_ready += w->not_ready;
    s.lag_us.insert(s.lag_us.end(), w->lag_us.begin(), w->lag_us.end());
    s.thread_cpu_s += w->cpu_s;
  }
  std::sort(s.lag_us.begin(), s.lag_us.end());
  s.run_s = absl::ToDoubleSeconds(stopped_ - start_);
  return s;
}

}  // namespace ringside::bench
