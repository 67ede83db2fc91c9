#include "tests/daemon/fake_aggregator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/common/series_set_digest.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/server_context.h"

namespace ringside::testing {
namespace {

// A tombstone: the same kind of message with nothing in it (what the uploader resends for a
// message it dropped after sending).
bool IsEmptyBody(const v1::AgentMessage& m) {
  switch (m.body_case()) {
    case v1::AgentMessage::kSamples:
      return m.samples().ids_size() == 0;
    case v1::AgentMessage::kCollectives:
      return m.collectives().records_size() == 0;
    case v1::AgentMessage::kLinkEvents:
      return m.link_events().events_size() == 0;
    default:
      return false;
  }
}

}  // namespace

class FakeAggregator::Service final : public v1::Ingest::Service {
 public:
  explicit Service(FakeAggregator* f) : f_(f) {}

  grpc::Status Stream(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<v1::AggregatorMessage, v1::AgentMessage>* stream) override {
    v1::AgentMessage m;
    if (!stream->Read(&m)) return grpc::Status::OK;
    int session;
    FakeAggregatorBehavior b;
    uint64_t acked;
    std::set<uint32_t> defined;
    bool defs_known = false;
    {
      absl::MutexLock l(&f_->mu_);
      b = f_->behavior_;
      if (!m.has_hello() || m.seq() != 0) {
        f_->violations_.push_back("the first message of a session is not a Hello with seq 0");
      }
      f_->hellos_.push_back(m.hello());
      f_->hello_times_.push_back(absl::Now());
      f_->max_open_sessions_ = std::max(f_->max_open_sessions_, ++f_->open_sessions_);
      session = static_cast<int>(f_->hellos_.size());
      f_->received_.push_back({session, m});
      if (m.hello().agent_epoch() != f_->epoch_) {
        f_->epoch_ = m.hello().agent_epoch();
        f_->contiguous_ = 0;
        f_->above_.clear();
        f_->accepted_.clear();
      }
      // The agent holds nothing below resend_from_seq: the gap below it is closed.
      if (m.hello().resend_from_seq() > 0) {
        f_->contiguous_ = std::max(f_->contiguous_, m.hello().resend_from_seq() - 1);
      }
      while (f_->above_.erase(f_->contiguous_ + 1) > 0) ++f_->contiguous_;
      f_->above_.erase(f_->above_.begin(), f_->above_.upper_bound(f_->contiguous_));
      acked = f_->contiguous_;
      auto set = f_->definition_sets_.find(m.hello().defs_digest());
      if (b.definition_sets && set != f_->definition_sets_.end()) {
        defined = set->second;
        defs_known = true;
        ++f_->defs_known_sent_;
      }
    }
    // Closed when the call returns, before the agent sees it end.
    struct Closer {
      FakeAggregator* f;
      ~Closer() {
        absl::MutexLock l(&f->mu_);
        --f->open_sessions_;
      }
    } closer{f_};
    if (b.refuse_code != grpc::StatusCode::OK) return grpc::Status(b.refuse_code, b.refuse_message);
    if (b.send_hello_ack) {
      v1::AggregatorMessage a;
      a.mutable_hello_ack()->set_protocol_version(b.protocol_version);
      a.mutable_hello_ack()->set_acked_seq(acked);
      a.mutable_hello_ack()->set_aggregator_version("fake");
      a.mutable_hello_ack()->set_defs_known(defs_known);
      if (!stream->Write(a)) return grpc::Status::OK;
    }
    if (b.stop_reading_after_hello || !b.send_hello_ack) {
      for (int i = 0; i < 100000 && !ctx->IsCancelled(); ++i) {
        {
          absl::MutexLock l(&f_->mu_);
          if (f_->stopping_) break;
        }
        absl::SleepFor(absl::Milliseconds(2));
      }
      return grpc::Status(grpc::StatusCode::CANCELLED, "fake stopped");
    }
    while (stream->Read(&m)) {
      bool send_ack = false;
      uint64_t ack_to = 0;
      {
        absl::MutexLock l(&f_->mu_);
        f_->received_.push_back({session, m});
        if (m.has_series_defs()) {
          for (const v1::SeriesDef& d : m.series_defs().defs()) defined.insert(d.id());
          if (m.seq() != 0) f_->violations_.push_back("SeriesDefs with a seq");
          const std::string& complete = m.series_defs().complete_digest();
          if (b.definition_sets && !complete.empty()) {
            daemon::SeriesSetDigest digest;
            std::set<uint32_t> ids;
            for (const v1::SeriesDef& d : m.series_defs().defs()) {
              digest.Add(d);
              ids.insert(d.id());
            }
            if (digest.Finish() == complete) {
              f_->definition_sets_[complete] = std::move(ids);
            } else {
              f_->violations_.push_back("complete_digest does not match the definitions");
            }
          }
          continue;
        }
        if (m.has_hello()) {
          f_->violations_.push_back("a second Hello");
          continue;
        }
        if (m.has_samples()) {
          for (uint32_t id : m.samples().ids()) {
            if (!defined.count(id)) {
              f_->violations_.push_back(
                  absl::StrCat("session ", session, ": id ", id, " used before its SeriesDef"));
            }
          }
        }
        const uint64_t seq = m.seq();
        if (seq == 0) {
          f_->violations_.push_back("a sequenced message with seq 0");
          continue;
        }
        if (seq <= f_->contiguous_ || f_->above_.count(seq)) {
          ++f_->duplicates_;
          auto it = f_->accepted_.find(seq);
          if (it != f_->accepted_.end() && !IsEmptyBody(m) &&
              !google::protobuf::util::MessageDifferencer::Equals(it->second, m)) {
            f_->violations_.push_back(absl::StrCat("seq ", seq, " resent with other content"));
          }
        } else {
          f_->accepted_[seq] = m;
          if (seq == f_->contiguous_ + 1) {
            ++f_->contiguous_;
            while (f_->above_.erase(f_->contiguous_ + 1) > 0) ++f_->contiguous_;
          } else {
            f_->above_.insert(seq);
          }
        }
        send_ack = f_->behavior_.ack;
        ack_to = f_->contiguous_;
      }
      if (send_ack) {
        v1::AggregatorMessage a;
        a.mutable_ack()->set_acked_seq(ack_to);
        if (!stream->Write(a)) break;
      }
    }
    return grpc::Status::OK;
  }

 private:
  FakeAggregator* f_;
};

int FakeAggregator::max_open_sessions() const {
  absl::MutexLock l(&mu_);
  return max_open_sessions_;
}

FakeAggregator::FakeAggregator() { Start(); }

FakeAggregator::~FakeAggregator() { Stop(); }

void FakeAggregator::Start() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = false;
  }
  service_ = std::make_unique<Service>(this);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address_.empty() ? "127.0.0.1:0" : address_,
                           grpc::InsecureServerCredentials(), &port);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 1000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (address_.empty() && port > 0) address_ = absl::StrCat("127.0.0.1:", port);
}

void FakeAggregator::Stop() {
  if (!server_) return;
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(100));
  server_->Wait();
  server_.reset();
  service_.reset();
}

void FakeAggregator::SetBehavior(const FakeAggregatorBehavior& b) {
  absl::MutexLock l(&mu_);
  behavior_ = b;
}

void FakeAggregator::ForgetState() {
  absl::MutexLock l(&mu_);
  contiguous_ = 0;
  above_.clear();
  accepted_.clear();
  definition_sets_.clear();
}

int FakeAggregator::defs_known_sent() const {
  absl::MutexLock l(&mu_);
  return defs_known_sent_;
}

size_t FakeAggregator::definition_sets_held() const {
  absl::MutexLock l(&mu_);
  return definition_sets_.size();
}

std::vector<FakeAggregator::Received> FakeAggregator::received() const {
  absl::MutexLock l(&mu_);
  return received_;
}

std::vector<v1::Hello> FakeAggregator::hellos() const {
  absl::MutexLock l(&mu_);
  return hellos_;
}

std::vector<absl::Time> FakeAggregator::hello_times() const {
  absl::MutexLock l(&mu_);
  return hello_times_;
}

std::map<uint64_t, v1::AgentMessage> FakeAggregator::accepted() const {
  absl::MutexLock l(&mu_);
  return accepted_;
}

uint64_t FakeAggregator::contiguous() const {
  absl::MutexLock l(&mu_);
  return contiguous_;
}

uint64_t FakeAggregator::duplicates() const {
  absl::MutexLock l(&mu_);
  return duplicates_;
}

std::vector<std::string> FakeAggregator::violations() const {
  absl::MutexLock l(&mu_);
  return violations_;
}

bool FakeAggregator::WaitFor(const std::function<bool()>& pred, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!pred()) {
    if (absl::Now() >= deadline) return pred();
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

}  // namespace ringside::testing
