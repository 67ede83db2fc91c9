#include "daemon/aggregator/alerts/alert_dispatcher.h"

#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/ascii.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "daemon/aggregator/alerts/alert_metrics.h"
#include "daemon/aggregator/alerts/alertmanager_sender.h"
#include "daemon/aggregator/alerts/hmac.h"
#include "daemon/aggregator/alerts/repeated_flags.h"
#include "daemon/aggregator/alerts/webhook_sender.h"

namespace ringside::daemon {

absl::StatusOr<std::string> ReadSecretFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot read --webhook-secret-file ", path));
  }
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return absl::DataLossError(absl::StrCat("cannot read --webhook-secret-file ", path));
  }
  std::string secret = text.str();
  absl::string_view s = secret;
  if (absl::ConsumeSuffix(&s, "\n")) absl::ConsumeSuffix(&s, "\r");
  if (s.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--webhook-secret-file ", path, " is empty"));
  }
  return std::string(s);
}

absl::StatusOr<std::map<analysis::IncidentKind, absl::Duration>> ParseMinFiringFor(
    absl::string_view list) {
  std::map<analysis::IncidentKind, absl::Duration> out;
  for (const std::string& item : SplitList(list)) {
    const size_t eq = item.find('=');
    const std::optional<analysis::IncidentKind> kind =
        eq == std::string::npos ? std::nullopt
                                : analysis::ParseIncidentKind(absl::StripAsciiWhitespace(
                                      absl::string_view(item).substr(0, eq)));
    absl::Duration d;
    if (!kind.has_value() ||
        !absl::ParseDuration(absl::StripAsciiWhitespace(absl::string_view(item).substr(eq + 1)),
                             &d) ||
        d < absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--alert-min-firing-for: \"", item,
          "\" is not kind=duration (kinds: link_down, link_flapping, link_degraded, pause_storm, "
          "congestion, straggler, job_slowdown, gpu_throttled, gpu_xid, gpu_memory_error, "
          "gpu_pcie_degraded; e.g. link_down=60s)"));
    }
    if (!out.emplace(*kind, d).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("--alert-min-firing-for: ", analysis::IncidentKindName(*kind),
                       " is given twice"));
    }
  }
  return out;
}

absl::StatusOr<std::unique_ptr<AlertDispatcher>> AlertDispatcher::Start(AlertOptions options) {
  std::unique_ptr<AlertDispatcher> d(new AlertDispatcher());
  d->options_ = std::move(options);
  AlertOptions& o = d->options_;
  if (!o.now) o.now = absl::Now;
  if (!o.log) o.log = [](const std::string&) {};
  if (o.queue_size == 0) return absl::InvalidArgumentError("--alert-queue-size must be positive");
  if (o.resend_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--alert-resend-interval must be positive");
  }
  if (o.max_age <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--webhook-max-age must be positive");
  }
  if (o.batch_delay < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--alert-batch-delay must not be negative");
  }
  if (o.min_firing < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--alert-min-firing must not be negative");
  }
  if (!o.webhook_urls.empty() && o.webhook_secret.empty()) {
    return absl::InvalidArgumentError(
        "--webhook-url needs --webhook-secret-file (webhooks are always signed)");
  }
  if (o.tls.client_cert.empty() != o.tls.client_key.empty()) {
    return absl::InvalidArgumentError("--alert-client-cert and --alert-client-key go together");
  }
  const std::pair<const char*, std::string> tls_files[] = {
      {"alert-ca", o.tls.ca_file},
      {"alert-client-cert", o.tls.client_cert},
      {"alert-client-key", o.tls.client_key}};
  for (const auto& [flag, file] : tls_files) {
    if (!file.empty() && !std::ifstream(file).good()) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, ": cannot read ", file));
    }
  }
  struct Target {
    std::string type;
    std::string url;
  };
  std::vector<Target> targets;
  for (const std::string& u : o.alertmanager_urls) targets.push_back({"alertmanager", u});
  for (const std::string& u : o.webhook_urls) targets.push_back({"webhook", u});
  std::vector<SenderOptions> configs;
  std::map<std::string, int> names;
  for (const Target& t : targets) {
    absl::StatusOr<HttpUrl> url = ParseHttpUrl(t.url);
    if (!url.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", t.type == "webhook" ? "webhook-url" : "alertmanager-url", ": ",
                       url.status().message()));
    }
    SenderOptions so;
    so.type = t.type;
    so.name = absl::StrCat(t.type, ":", url->authority);
    if (int n = ++names[so.name]; n > 1) absl::StrAppend(&so.name, "#", n);
    so.key = absl::StrCat(t.type, ":", Sha256Hex(t.url).substr(0, 16));
    so.url = *url;
    so.http_timeout = o.http_timeout;
    so.tls = o.tls;
    so.backoff = o.backoff;
    so.max_age = o.max_age;
    so.queue_size = o.queue_size;
    so.resend_interval = o.resend_interval;
    so.batch_delay = o.batch_delay;
    so.min_firing = o.min_firing;
    so.min_firing_for = o.min_firing_for;
    so.runbook_base = o.runbook_base_url;
    so.now = o.now;
    so.log = o.log;
    if (t.type == "webhook") so.secret = o.webhook_secret;
    configs.push_back(std::move(so));
  }

  const std::string path =
      o.state_dir.empty() ? std::string() : absl::StrCat(o.state_dir, "/alert_delivery_state");
  absl::StatusOr<std::unique_ptr<DeliveryState>> state = DeliveryState::Open(path);
  if (!state.ok() && state.status().code() == absl::StatusCode::kDataLoss) {
    // A damaged file: keep it for inspection and start afresh (receivers may see repeats).
    const std::string aside = absl::StrCat(path, ".corrupt");
    std::rename(path.c_str(), aside.c_str());
    o.log(absl::StrCat("alerts: ", state.status().message(), "; moved to ", aside,
                       " and starting with no delivery history"));
    state = DeliveryState::Open(path);
  }
  if (!state.ok()) return state.status();
  d->state_ = std::move(*state);

  for (SenderOptions& so : configs) {
    so.state = d->state_.get();
    o.log(absl::StrCat("alerts: sending to ", so.name,
                       so.type == "alertmanager" ? " (Alertmanager v2 API)" : " (signed webhook)"));
    if (so.type == "alertmanager") {
      d->senders_.push_back(std::make_unique<AlertmanagerSender>(std::move(so)));
    } else {
      d->senders_.push_back(std::make_unique<WebhookSender>(std::move(so)));
    }
  }
  d->metrics_ = std::make_shared<AlertMetrics>(&d->senders_);
  return d;
}

AlertDispatcher::~AlertDispatcher() { Stop(); }

void AlertDispatcher::Stop() {
  for (auto& s : senders_) s->Stop();
}

void AlertDispatcher::OnChanges(const std::vector<analysis::IncidentChange>& changes) {
  for (const analysis::IncidentChange& c : changes) {
    for (auto& s : senders_) s->Enqueue(c);
  }
}

void AlertDispatcher::Reconcile(const std::vector<analysis::Incident>& open,
                                const IncidentLookup& lookup) {
  state_->Prune(options_.now() - absl::Hours(24));
  for (auto& s : senders_) s->Reconcile(open, lookup);
}

}  // namespace ringside::daemon
