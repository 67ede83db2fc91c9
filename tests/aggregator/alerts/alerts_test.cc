// Alerts, piece by piece: the HMAC signature (RFC 4231 vectors), the alert label mapping and the
// JSON shapes (Alertmanager postable alerts, webhook bodies), the HTTP client's parsing, the
// retry backoff, the bounded queue, the delivery state's round trip across a "restart", and the
// webhook sender against a loopback receiver (signatures, order, retries, no repeats), and HTTPS
// (libcurl) against a loopback TLS receiver with a test CA: delivery, a server it cannot verify
// (refused, counted, logged), a client certificate for mTLS.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/str_cat.h"
#include "daemon/aggregator/alerts/alert_dispatcher.h"
#include "daemon/aggregator/alerts/alert_format.h"
#include "daemon/aggregator/alerts/alert_metrics.h"
#include "daemon/aggregator/alerts/alertmanager_sender.h"
#include "daemon/aggregator/alerts/delivery_state.h"
#include "daemon/aggregator/alerts/hmac.h"
#include "daemon/aggregator/alerts/http_client.h"
#include "daemon/aggregator/alerts/repeated_flags.h"
#include "daemon/aggregator/alerts/webhook_sender.h"
#include "daemon/aggregator/metrics/aggregator_metrics.h"
#include "nlohmann/json.hpp"
#include "tests/aggregator/alerts/http_receiver.h"
#include "tests/testing/certs.h"
#include "tests/testing/eventually.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/tls_receiver.h"

namespace ringside::daemon {
namespace {

using analysis::Incident;
using analysis::IncidentChange;
using analysis::IncidentChangeType;
using analysis::IncidentKind;

Incident Flapping(uint64_t id = 7, uint64_t revision = 1) {
  Incident inc;
  inc.id = id;
  inc.kind = IncidentKind::kLinkFlapping;
  inc.severity = analysis::Severity::kCritical;
  inc.entity = {{"node", "node-17"},
                {"device", "mlx5_3"},
                {"port", "1"},
                {"netdev", "eth3"},
                {"origin", "x"}};
  inc.opened = absl::FromUnixMillis(1'800'000'000'250);
  inc.updated = inc.opened + absl::Seconds(3);
  inc.evidence = {{"transitions", 4}, {"cycles", 2}};
  inc.summary = "mlx5_3 port 1 on node-17 went down 2 times in 10m";
  inc.revision = revision;
  return inc;
}

// --- HMAC-SHA256 (RFC 4231) ---------------------------------------------------------------------

TEST(AlertsHmacTest, Rfc4231Vectors) {
  // Test case 1: key = 20 bytes of 0x0b, data "Hi There".
  EXPECT_EQ(HmacSha256Hex(std::string(20, '\x0b'), "Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  // Test case 2: key "Jefe".
  EXPECT_EQ(HmacSha256Hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // Test case 6: a key longer than the block size (131 bytes of 0xaa).
  EXPECT_EQ(HmacSha256Hex(std::string(131, '\xaa'),
                          "Test Using Larger Than Block-Size Key - Hash Key First"),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

// --- labels and JSON ----------------------------------------------------------------------------

TEST(AlertsFormatTest, AlertNamesAreFixedPerKind) {
  EXPECT_EQ(AlertName(IncidentKind::kLinkFlapping), "RingsideLinkFlapping");
  EXPECT_EQ(AlertName(IncidentKind::kLinkDown), "RingsideLinkDown");
  EXPECT_EQ(AlertName(IncidentKind::kLinkDegraded), "RingsideLinkDegraded");
  EXPECT_EQ(AlertName(IncidentKind::kPauseStorm), "RingsidePauseStorm");
  EXPECT_EQ(AlertName(IncidentKind::kCongestion), "RingsideCongestion");
  EXPECT_EQ(AlertName(IncidentKind::kStraggler), "RingsideStraggler");
  EXPECT_EQ(AlertName(IncidentKind::kJobSlowdown), "RingsideJobSlowdown");
}

TEST(AlertsFormatTest, LabelsComeFromTheEntity) {
  const std::map<std::string, std::string> labels = AlertLabels(Flapping());
  const std::map<std::string, std::string> want = {{"alertname", "RingsideLinkFlapping"},
                                                   {"severity", "critical"},
                                                   {"node", "node-17"},
                                                   {"device", "mlx5_3"},
                                                   {"port", "1"},
                                                   {"netdev", "eth3"},
                                                   {"ringside_incident_key",
                                                    analysis::StableIncidentKey(Flapping())}};
  EXPECT_EQ(labels, want);  // "origin" is not an alert label

  // Another aggregator fed the same data numbers the incident differently but sends the same
  // alert: no label depends on the local id (or on anything but kind, entity and opening time).
  Incident replica = Flapping();
  replica.id = 4242;
  replica.revision = 9;
  replica.updated += absl::Seconds(3);
  EXPECT_EQ(AlertLabels(replica), labels);
  Incident later = Flapping();
  later.opened += absl::Milliseconds(1);
  EXPECT_NE(AlertLabels(later).at("ringside_incident_key"), labels.at("ringside_incident_key"));

  Incident straggler;
  straggler.id = 9;
  straggler.kind = IncidentKind::kStraggler;
  straggler.severity = analysis::Severity::kWarning;
  straggler.entity = {{"job", "llama"}, {"comm", "tp0"}, {"rank", "5"}, {"function", "AllReduce"}};
  const std::map<std::string, std::string> s = AlertLabels(straggler);
  EXPECT_EQ(s.at("job"), "llama");
  EXPECT_EQ(s.at("rank"), "5");
  EXPECT_EQ(s.at("comm"), "tp0");
  EXPECT_EQ(s.at("severity"), "warning");
  EXPECT_EQ(s.count("function"), 0u);
  EXPECT_EQ(s.count("pod"), 0u) << "no pod known: no pod label";

  // A straggler whose plugin knew its Kubernetes pod: pod and namespace labels.
  straggler.entity["pod"] = "llama-worker-5";
  straggler.entity["namespace"] = "ml-team";
  const std::map<std::string, std::string> k = AlertLabels(straggler);
  EXPECT_EQ(k.at("pod"), "llama-worker-5");
  EXPECT_EQ(k.at("namespace"), "ml-team");
  EXPECT_EQ(k.size(), 8u);  // alertname severity job comm rank pod namespace ringside_incident_key
}

TEST(AlertsFormatTest, PostableAlertShape) {
  Incident inc = Flapping();
  analysis::CauseLink cause;
  cause.kind = "pause_storm";
  cause.summary = "pause_storm on node-17 mlx5_3 prio 3";
  inc.causes.push_back(cause);
  auto firing = nlohmann::json::parse(PostableAlertsJson({&inc}, "https://x/runbook.md"));
  ASSERT_TRUE(firing.is_array());
  ASSERT_EQ(firing.size(), 1u);
  const auto& a = firing[0];
  EXPECT_EQ(a["labels"]["alertname"], "RingsideLinkFlapping");
  EXPECT_EQ(a["labels"]["ringside_incident_key"], analysis::StableIncidentKey(inc));
  EXPECT_EQ(a["annotations"]["summary"], inc.summary);
  EXPECT_EQ(a["annotations"]["evidence"], "cycles=2 transitions=4");
  EXPECT_EQ(a["annotations"]["cause"], "pause_storm on node-17 mlx5_3 prio 3");
  EXPECT_EQ(a["annotations"]["runbook_url"], "https://x/runbook.md#link_flapping");
  EXPECT_EQ(a["startsAt"], "2027-01-15T08:00:00.250Z");
  EXPECT_FALSE(a.contains("endsAt"));  // firing: Alertmanager applies its resolve_timeout

  inc.resolved = inc.opened + absl::Minutes(12);
  inc.resolution = "quiet for 10m";
  auto resolved = nlohmann::json::parse(PostableAlertJson(inc, kDefaultRunbookBaseUrl));
  EXPECT_EQ(resolved["endsAt"], "2027-01-15T08:12:00.250Z");
  EXPECT_EQ(resolved["annotations"]["resolution"], "quiet for 10m");
  EXPECT_EQ(resolved["annotations"]["runbook_url"],
            std::string(kDefaultRunbookBaseUrl) + "#link_flapping");
}

// A GPU incident pages with its GPU's node, index and bus id; a straggler's cause evidence (what
// was checked) rides along as an annotation.
TEST(AlertsFormatTest, GpuIncidentAndCauseEvidence) {
  Incident gpu;
  gpu.id = 4;
  gpu.kind = analysis::IncidentKind::kGpuXid;
  gpu.severity = analysis::Severity::kCritical;
  gpu.entity = {{"node", "node-05"}, {"gpu", "3"}, {"pci_bus_id", "0000:1a:00.0"}};
  gpu.opened = gpu.updated = absl::FromUnixSeconds(1'800'000'000);
  gpu.summary = "XID 79 on GPU 3 (0000:1a:00.0) on node-05";
  const std::map<std::string, std::string> l = AlertLabels(gpu);
  EXPECT_EQ(l.at("alertname"), "RingsideGpuXid");
  EXPECT_EQ(l.at("gpu"), "3");
  EXPECT_EQ(l.at("pci_bus_id"), "0000:1a:00.0");
  EXPECT_EQ(l.at("severity"), "critical");
  Incident straggler = gpu;
  straggler.kind = analysis::IncidentKind::kStraggler;
  straggler.entity = {{"job", "j"}, {"rank", "17"}, {"node", "node-05"}};
  analysis::CauseLink host;
  host.kind = "host";
  host.summary = "no fabric incident on node-05 or its leaf switch in the same window";
  host.evidence = {{"gpu_incidents", 0}, {"cgroup_throttled_share", 0.02}};
  straggler.causes.push_back(host);
  auto a = nlohmann::json::parse(PostableAlertJson(straggler, "https://x/runbook.md"));
  EXPECT_EQ(a["annotations"]["cause_evidence"], "cgroup_throttled_share=0.02 gpu_incidents=0");
  EXPECT_EQ(AlertName(analysis::IncidentKind::kGpuThrottled), "RingsideGpuThrottled");
  EXPECT_EQ(AlertName(analysis::IncidentKind::kGpuMemoryError), "RingsideGpuMemoryError");
  EXPECT_EQ(AlertName(analysis::IncidentKind::kGpuPcieDegraded), "RingsideGpuPcieDegraded");
}

// Issue #27: a straggler alert says where the rank's lateness is, as an annotation (a label that
// changed while the incident is open would be another alert to Alertmanager).
TEST(AlertsFormatTest, StragglerAlertSaysWhere) {
  Incident straggler;
  straggler.id = 3;
  straggler.kind = IncidentKind::kStraggler;
  straggler.opened = absl::FromUnixSeconds(1'800'000'000);
  straggler.entity = {{"job", "llama"}, {"comm", "dp"}, {"rank", "17"}};
  straggler.evidence = {{"host_share", 0.9}, {"host_lateness_ms", 10}, {"gpu_lateness_ms", 1}};
  auto a = nlohmann::json::parse(PostableAlertJson(straggler, ""));
  EXPECT_EQ(a["annotations"]["where"], "host");
  EXPECT_FALSE(a["labels"].contains("where"));
  straggler.evidence["host_share"] = 0.1;
  EXPECT_EQ(nlohmann::json::parse(PostableAlertJson(straggler, ""))["annotations"]["where"], "gpu");
  straggler.evidence.erase("host_share");  // clocks not comparable
  EXPECT_EQ(nlohmann::json::parse(PostableAlertJson(straggler, ""))["annotations"]["where"],
            "unknown");
  EXPECT_FALSE(nlohmann::json::parse(PostableAlertJson(Flapping(), ""))["annotations"].contains(
      "where"));
}

TEST(AlertsFormatTest, WebhookBodyShape) {
  Incident inc = Flapping(7, 3);
  auto body = nlohmann::json::parse(WebhookBody(inc, IncidentChangeType::kUpdated));
  EXPECT_EQ(body["delivery_id"], "inc-7-r3-updated");
  EXPECT_EQ(body["type"], "updated");
  EXPECT_EQ(body["timestamp"], "2027-01-15T08:00:03.250Z");
  EXPECT_EQ(body["incident"]["id"], 7);
  EXPECT_EQ(body["incident"]["kind"], "link_flapping");
  EXPECT_EQ(body["incident"]["entity"]["device"], "mlx5_3");
  EXPECT_EQ(body["incident"]["revision"], 3);
  EXPECT_TRUE(body["incident"]["resolved"].is_null());
  const auto headers = WebhookHeaders("{}", "s3cret", "inc-7-r3-updated", inc.updated);
  std::map<std::string, std::string> h(headers.begin(), headers.end());
  EXPECT_EQ(h["X-Ringside-Signature"], "sha256=" + HmacSha256Hex("s3cret", "{}"));
  EXPECT_EQ(h["X-Ringside-Delivery"], "inc-7-r3-updated");
  EXPECT_EQ(h["X-Ringside-Timestamp"], "1800000003");
}

// --- HTTP client
// ----------------------------------------------------------------------------------

TEST(AlertsHttpTest, ParsesUrls) {
  auto u = ParseHttpUrl("http://am.example:9093/prefix?x=1");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->host, "am.example");
  EXPECT_EQ(u->port, 9093);
  EXPECT_EQ(u->path, "/prefix?x=1");
  EXPECT_EQ(u->authority, "am.example:9093");
  auto v6 = ParseHttpUrl("http://[::1]:8080");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->path, "/");
  auto plain = ParseHttpUrl("http://hooks");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->port, 80);
  EXPECT_FALSE(plain->https);
  auto tls = ParseHttpUrl("https://hooks.example/services/T0/B1?x=1");
  ASSERT_TRUE(tls.ok()) << tls.status();
  EXPECT_TRUE(tls->https);
  EXPECT_EQ(tls->port, 443);
  EXPECT_EQ(tls->path, "/services/T0/B1?x=1");
  EXPECT_EQ(HttpUrlString(*tls), "https://hooks.example/services/T0/B1?x=1");
  EXPECT_EQ(ParseHttpUrl("https://[::1]:9443/")->port, 9443);
  EXPECT_FALSE(ParseHttpUrl("ftp://x").ok());
  EXPECT_FALSE(ParseHttpUrl("http://:80/").ok());
  EXPECT_FALSE(ParseHttpUrl("http://x:99999/").ok());
  EXPECT_FALSE(ParseHttpUrl("http://user:pw@x/").ok());
}

TEST(AlertsHttpTest, ParsesResponses) {
  auto r = ParseHttpResponse("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b\r\n\r\nhello");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hello");
  EXPECT_EQ(r->headers.at("x-a"), "b");
  auto c = ParseHttpResponse(
      "HTTP/1.1 400 Bad\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->status, 400);
  EXPECT_EQ(c->body, "abcde");
  EXPECT_FALSE(ParseHttpResponse("SSH-2.0-OpenSSH\r\n\r\n").ok());
  EXPECT_FALSE(ParseHttpResponse("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc").ok());
  EXPECT_FALSE(
      ParseHttpResponse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").ok());
}

TEST(AlertsHttpTest, RefusedAndTimedOut) {
  testing::HttpReceiver down;
  const int port = down.port();
  down.Stop();
  HttpClientRequest req;
  req.url = *ParseHttpUrl(absl::StrCat("http://127.0.0.1:", port, "/"));
  req.timeout = absl::Seconds(2);
  auto r = SendHttp(req);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();

  // A listener that never answers: the deadline ends the request.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(listen(fd, 4), 0);
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  req.url = *ParseHttpUrl(absl::StrCat("http://127.0.0.1:", ntohs(a.sin_port), "/"));
  req.timeout = absl::Milliseconds(300);
  const absl::Time start = absl::Now();
  r = SendHttp(req);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  close(fd);
}

// --- backoff ------------------------------------------------------------------------------------

TEST(AlertsBackoffTest, JitteredExponentialCapped) {
  AlertOptions defaults;
  Backoff b(defaults.backoff, /*seed=*/42);
  absl::Duration nominal = defaults.backoff.initial;
  for (int i = 0; i < 12; ++i) {
    const absl::Duration d = b.Next();
    EXPECT_GE(d, std::min(nominal, defaults.backoff.max) * 0.8 - absl::Milliseconds(1)) << i;
    EXPECT_LE(d, std::min(nominal * 1.2, defaults.backoff.max)) << i;
    nominal = nominal * defaults.backoff.multiplier;
  }
  EXPECT_EQ(defaults.backoff.max, absl::Seconds(30));
  b.Reset();
  EXPECT_LE(b.Next(), absl::Milliseconds(1200));
}

// --- delivery state -----------------------------------------------------------------------------

TEST(AlertsDeliveryStateTest, RoundTripAcrossReopen) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/alert_delivery_state";
  {
    auto s = DeliveryState::Open(path);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_FALSE((*s)->Delivered("webhook:a", 7, 1));
    ASSERT_TRUE(
        (*s)->Record("webhook:a", 7, {2, IncidentChangeType::kUpdated, absl::FromUnixSeconds(100)})
            .ok());
    ASSERT_TRUE((*s)->Record("alertmanager:b", 7,
                             {3, IncidentChangeType::kResolved, absl::FromUnixSeconds(200)})
                    .ok());
    // An older revision never overwrites a newer one.
    ASSERT_TRUE(
        (*s)->Record("webhook:a", 7, {1, IncidentChangeType::kOpened, absl::FromUnixSeconds(300)})
            .ok());
  }
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  auto s = DeliveryState::Open(path);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE((*s)->Delivered("webhook:a", 7, 2));
  EXPECT_FALSE((*s)->Delivered("webhook:a", 7, 3));
  EXPECT_EQ((*s)->Get("webhook:a", 7)->type, IncidentChangeType::kUpdated);
  EXPECT_EQ((*s)->Get("alertmanager:b", 7)->type, IncidentChangeType::kResolved);
  EXPECT_EQ((*s)->Get("alertmanager:b", 7)->at, absl::FromUnixSeconds(200));
  (*s)->Prune(absl::FromUnixSeconds(250));  // the resolved entry is old: dropped
  EXPECT_FALSE((*s)->Get("alertmanager:b", 7).has_value());
  EXPECT_TRUE((*s)->Get("webhook:a", 7).has_value());

  DeliveryMap m = (*s)->Snapshot();
  auto parsed = ParseDeliveryState(SerializeDeliveryState(m));
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, m);
}

TEST(AlertsDeliveryStateTest, MalformedFileIsDataLoss) {
  EXPECT_EQ(ParseDeliveryState("nope\n").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(ParseDeliveryState("ringside-alert-delivery-state 1\nwebhook:a\t7\tx\topened\t1\n")
                .status()
                .code(),
            absl::StatusCode::kDataLoss);
  EXPECT_TRUE(ParseDeliveryState("").ok());
  // The dispatcher moves a damaged file aside and starts with no history.
  testing::TempDir dir;
  { std::ofstream(dir.path() + "/alert_delivery_state") << "garbage\n"; }
  AlertOptions o;
  o.state_dir = dir.path();
  auto d = AlertDispatcher::Start(o);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/alert_delivery_state.corrupt"));
}

TEST(AlertsDispatcherTest, ValidatesConfiguration) {
  AlertOptions o;
  o.webhook_urls = {"http://127.0.0.1:1/hook"};
  EXPECT_EQ(AlertDispatcher::Start(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.webhook_secret = "k";
  o.alertmanager_urls = {"ftp://am:9093"};
  auto bad = AlertDispatcher::Start(o);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--alertmanager-url"), absl::string_view::npos)
      << bad.status();
  o.alertmanager_urls = {"https://am:9093"};  // https is a transport like http
  EXPECT_TRUE(AlertDispatcher::Start(o).ok());
  testing::TempDir dir;
  EXPECT_EQ(ReadSecretFile(dir.path() + "/missing").status().code(), absl::StatusCode::kNotFound);
  { std::ofstream(dir.path() + "/s") << "topsecret\n"; }
  EXPECT_EQ(*ReadSecretFile(dir.path() + "/s"), "topsecret");
  { std::ofstream(dir.path() + "/empty") << "\n"; }
  EXPECT_FALSE(ReadSecretFile(dir.path() + "/empty").ok());
}

TEST(AlertsFlagsTest, RepeatedListFlagsMerge) {
  std::vector<std::string> args = {"prog",           "--webhook_url=http://a/x,http://b/y",
                                   "--listen=:1",    "--webhook_url",
                                   "http://c/z",     "--",
                                   "--webhook_url=d"};
  MergeRepeatedFlag(args, "webhook_url");
  const std::vector<std::string> want = {"prog", "--webhook_url=http://a/x,http://b/y,http://c/z",
                                         "--listen=:1", "--", "--webhook_url=d"};
  EXPECT_EQ(args, want);
  EXPECT_EQ(SplitList(" a, b,,c "), (std::vector<std::string>{"a", "b", "c"}));
}

// --- the webhook sender against a loopback receiver
// ------------------------------------------------

class AlertsWebhookSenderTest : public ::testing::Test {
 protected:
  SenderOptions Options(const std::string& url, DeliveryState* state) {
    SenderOptions o;
    o.type = "webhook";
    o.name = "webhook:test";
    o.key = "webhook:k";
    o.url = *ParseHttpUrl(url);
    o.state = state;
    o.secret = "s3cret";
    o.http_timeout = absl::Seconds(2);
    o.backoff = {absl::Milliseconds(50), absl::Milliseconds(200), 2.0, 0.2};
    return o;
  }
  static IncidentChange Change(IncidentChangeType t, uint64_t id, uint64_t rev) {
    IncidentChange c{t, Flapping(id, rev)};
    if (t == IncidentChangeType::kResolved) c.incident.resolved = c.incident.updated;
    return c;
  }
};

TEST_F(AlertsWebhookSenderTest, SignedInOrderRetriedAndNeverRepeated) {
  testing::TempDir dir;
  testing::HttpReceiver receiver;
  receiver.SetStatus(503);  // failing at first
  auto state = DeliveryState::Open(dir.path() + "/state");
  ASSERT_TRUE(state.ok());
  {
    WebhookSender sender(Options(receiver.url(), state->get()));
    sender.Enqueue(Change(IncidentChangeType::kOpened, 1, 1));
    sender.Enqueue(Change(IncidentChangeType::kUpdated, 1, 2));
    sender.Enqueue(Change(IncidentChangeType::kResolved, 1, 3));
    const absl::Time end = absl::Now() + absl::Seconds(10);
    while (receiver.Requests().size() < 3 && absl::Now() < end)
      absl::SleepFor(absl::Milliseconds(10));
    ASSERT_GE(receiver.Requests().size(), 3u);
    EXPECT_EQ(sender.stats().delivered.load(), 0u);
    receiver.SetStatus(200);
    ASSERT_TRUE(receiver.WaitForAccepted(3, absl::Seconds(10)));
    const auto stats_deadline = absl::Now() + absl::Seconds(5);
    while (sender.stats().queue_length.load() != 0 && absl::Now() < stats_deadline) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    EXPECT_EQ(sender.stats().delivered.load(), 3u);
    EXPECT_GE(sender.stats().failed.load(), 3u);
    EXPECT_GE(sender.stats().retried.load(), 3u);
    EXPECT_EQ(sender.stats().queue_length.load(), 0);
  }
  std::vector<testing::HttpReceiver::Request> got = receiver.Accepted();
  ASSERT_EQ(got.size(), 3u);
  const std::vector<std::string> types = {"opened", "updated", "resolved"};
  for (size_t i = 0; i < got.size(); ++i) {
    const auto& r = got[i];
    EXPECT_EQ(r.method, "POST");
    EXPECT_EQ(r.path, "/hook");
    EXPECT_EQ(r.headers.at("x-ringside-signature"), "sha256=" + HmacSha256Hex("s3cret", r.body));
    auto body = nlohmann::json::parse(r.body);
    EXPECT_EQ(body["type"], types[i]);
    EXPECT_EQ(r.headers.at("x-ringside-delivery"), body["delivery_id"]);
    EXPECT_EQ(body["incident"]["revision"], i + 1);
  }

  // A "restart": the same state, the same changes again (and a reconcile of the incident, now
  // resolved): nothing is sent twice.
  const size_t before = receiver.Requests().size();
  WebhookSender again(Options(receiver.url(), state->get()));
  again.Reconcile({}, [](uint64_t id) -> std::optional<Incident> {
    Incident inc = Flapping(id, 3);
    inc.resolved = inc.updated;
    return inc;
  });
  again.Enqueue(Change(IncidentChangeType::kOpened, 1, 1));
  again.Enqueue(Change(IncidentChangeType::kResolved, 1, 3));
  again.Enqueue(Change(IncidentChangeType::kOpened, 2, 1));  // a new incident: sent
  ASSERT_TRUE(receiver.WaitForAccepted(4, absl::Seconds(10)));
  absl::SleepFor(absl::Milliseconds(300));  // room for a (wrong) repeat to show up
  EXPECT_EQ(receiver.Requests().size(), before + 1);
  EXPECT_EQ(again.stats().duplicates_skipped.load(), 2u);
}

TEST_F(AlertsWebhookSenderTest, ReconcileSendsWhatTheReceiverMissed) {
  testing::TempDir dir;
  testing::HttpReceiver receiver;
  auto state = DeliveryState::Open(dir.path() + "/state");
  ASSERT_TRUE(state.ok());
  // Before the "restart": incident 1 delivered at revision 1 (opened), incident 2 delivered at
  // revision 2, incident 3 never delivered.
  ASSERT_TRUE((*state)->Record("webhook:k", 1, {1, IncidentChangeType::kOpened, absl::Now()}).ok());
  ASSERT_TRUE(
      (*state)->Record("webhook:k", 2, {2, IncidentChangeType::kUpdated, absl::Now()}).ok());
  WebhookSender sender(Options(receiver.url(), state->get()));
  // Now: 1 was resolved meanwhile (revision 2), 2 is open unchanged, 3 is open.
  sender.Reconcile({Flapping(2, 2), Flapping(3, 1)}, [](uint64_t id) -> std::optional<Incident> {
    if (id != 1) return std::nullopt;
    Incident inc = Flapping(1, 2);
    inc.resolved = inc.updated;
    return inc;
  });
  ASSERT_TRUE(receiver.WaitForAccepted(2, absl::Seconds(10)));
  absl::SleepFor(absl::Milliseconds(300));
  std::vector<testing::HttpReceiver::Request> got = receiver.Accepted();
  ASSERT_EQ(got.size(), 2u);
  std::set<std::string> ids;
  for (const auto& r : got) ids.insert(r.headers.at("x-ringside-delivery"));
  EXPECT_EQ(ids, (std::set<std::string>{"inc-3-r1-opened", "inc-1-r2-resolved"}));
}

TEST_F(AlertsWebhookSenderTest, QueueIsBoundedAndDropsAreCounted) {
  testing::HttpReceiver down;
  const std::string url = down.url();
  down.Stop();  // connections refused: nothing leaves the queue
  auto state = DeliveryState::Open("");
  ASSERT_TRUE(state.ok());
  SenderOptions o = Options(url, state->get());
  o.queue_size = 3;
  o.backoff = {absl::Seconds(10), absl::Seconds(10), 2.0, 0.0};
  WebhookSender sender(o);
  for (uint64_t i = 1; i <= 10; ++i) sender.Enqueue(Change(IncidentChangeType::kOpened, i, 1));
  EXPECT_EQ(sender.stats().queue_length.load(), 3);
  EXPECT_EQ(sender.stats().dropped_queue_full.load(), 7u);
}

TEST_F(AlertsWebhookSenderTest, ExpiredEventsAreDropped) {
  testing::HttpReceiver down;
  const std::string url = down.url();
  down.Stop();
  auto state = DeliveryState::Open("");
  ASSERT_TRUE(state.ok());
  SenderOptions o = Options(url, state->get());
  o.max_age = absl::Milliseconds(200);
  WebhookSender sender(o);
  sender.Enqueue(Change(IncidentChangeType::kOpened, 1, 1));
  const absl::Time end = absl::Now() + absl::Seconds(10);
  while (sender.stats().dropped_expired.load() == 0 && absl::Now() < end) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(sender.stats().dropped_expired.load(), 1u);
  EXPECT_EQ(sender.stats().queue_length.load(), 0);
}

TEST_F(AlertsWebhookSenderTest, PermanentRefusalIsNotRetried) {
  testing::HttpReceiver receiver;
  receiver.SetStatus(400);
  auto state = DeliveryState::Open("");
  ASSERT_TRUE(state.ok());
  WebhookSender sender(Options(receiver.url(), state->get()));
  sender.Enqueue(Change(IncidentChangeType::kOpened, 1, 1));
  const absl::Time end = absl::Now() + absl::Seconds(10);
  while (sender.stats().dropped_rejected.load() == 0 && absl::Now() < end) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(sender.stats().dropped_rejected.load(), 1u);
  EXPECT_EQ(receiver.Requests().size(), 1u);
}

// --- the Alertmanager sender against a loopback receiver
// -------------------------------------------

TEST(AlertsAlertmanagerSenderTest, ResendsFiringSendsResolvedOnce) {
  testing::TempDir dir;
  testing::HttpReceiver am;
  auto state = DeliveryState::Open(dir.path() + "/state");
  ASSERT_TRUE(state.ok());
  SenderOptions o;
  o.type = "alertmanager";
  o.name = "alertmanager:test";
  o.key = "alertmanager:k";
  o.url = *ParseHttpUrl(am.url("/prefix"));
  o.state = state->get();
  o.resend_interval = absl::Milliseconds(300);
  o.batch_delay = absl::Milliseconds(10);
  o.min_firing = absl::ZeroDuration();
  o.backoff = {absl::Milliseconds(50), absl::Milliseconds(200), 2.0, 0.2};
  o.runbook_base = "http://runbooks/r.md";
  auto posted = [&am](size_t i) { return nlohmann::json::parse(am.Requests()[i].body); };
  {
    AlertmanagerSender sender(o);
    sender.Enqueue({IncidentChangeType::kOpened, Flapping(7, 1)});
    // Firing: sent at once, then re-sent every resend_interval, never with endsAt.
    ASSERT_TRUE(am.WaitForAccepted(3, absl::Seconds(10)));
    for (size_t i = 0; i < 3; ++i) {
      const testing::HttpReceiver::Request r = am.Requests()[i];
      EXPECT_EQ(r.method, "POST");
      EXPECT_EQ(r.path, "/prefix/api/v2/alerts");
      EXPECT_EQ(r.headers.at("content-type"), "application/json");
      auto body = posted(i);
      ASSERT_EQ(body.size(), 1u);
      EXPECT_EQ(body[0]["labels"]["alertname"], "RingsideLinkFlapping");
      EXPECT_FALSE(body[0].contains("endsAt"));
    }
    Incident resolved = Flapping(7, 2);
    resolved.resolved = resolved.updated;
    sender.Enqueue({IncidentChangeType::kResolved, resolved});
    const size_t n = am.Requests().size();
    ASSERT_TRUE(am.WaitForAccepted(n + 1, absl::Seconds(10)));
    absl::SleepFor(absl::Milliseconds(800));  // more than two resend intervals
    // The resolved alert went out (with endsAt) and nothing after it: nothing fires any more.
    bool saw_resolved = false;
    for (size_t i = n - 1; i < am.Requests().size(); ++i) {
      for (const auto& a : posted(i)) saw_resolved |= a.contains("endsAt");
    }
    EXPECT_TRUE(saw_resolved);
    EXPECT_LE(am.Requests().size(), n + 1);
    EXPECT_EQ(sender.stats().queue_length.load(), 0);
  }
  // After a "restart" the resolved alert it already delivered is not sent again.
  const size_t before = am.Requests().size();
  AlertmanagerSender again(o);
  Incident resolved = Flapping(7, 2);
  resolved.resolved = resolved.updated;
  again.Reconcile({}, [&](uint64_t) -> std::optional<Incident> { return resolved; });
  again.Enqueue({IncidentChangeType::kResolved, resolved});
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_EQ(am.Requests().size(), before);
  EXPECT_EQ(again.stats().duplicates_skipped.load(), 1u);
}

TEST(AlertsAlertmanagerSenderTest, RetriesWhileDown) {
  testing::HttpReceiver am;
  am.SetStatus(500);
  auto state = DeliveryState::Open("");
  ASSERT_TRUE(state.ok());
  SenderOptions o;
  o.type = "alertmanager";
  o.name = "alertmanager:test";
  o.key = "alertmanager:k";
  o.url = *ParseHttpUrl(am.url(""));
  o.state = state->get();
  o.batch_delay = absl::Milliseconds(10);
  o.backoff = {absl::Milliseconds(50), absl::Milliseconds(100), 2.0, 0.2};
  AlertmanagerSender sender(o);
  sender.Enqueue({IncidentChangeType::kOpened, Flapping(7, 1)});
  const absl::Time end = absl::Now() + absl::Seconds(10);
  while (am.Requests().size() < 3 && absl::Now() < end) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_GE(sender.stats().failed.load(), 2u);
  EXPECT_EQ(sender.stats().queue_length.load(), 1);
  am.SetStatus(200);
  ASSERT_TRUE(am.WaitForAccepted(1, absl::Seconds(10)));
  EXPECT_GE(sender.stats().retried.load(), 2u);
  const absl::Time end2 = absl::Now() + absl::Seconds(5);
  while (sender.stats().queue_length.load() != 0 && absl::Now() < end2) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(sender.stats().queue_length.load(), 0);
  EXPECT_EQ(am.Requests()[0].path, "/api/v2/alerts");
}

// --- no lost pages: firing before resolved, held for the minimum firing time -------------------

SenderOptions AmOptions(const std::string& url, DeliveryState* state) {
  SenderOptions o;
  o.type = "alertmanager";
  o.name = "alertmanager:test";
  o.key = "alertmanager:k";
  o.url = *ParseHttpUrl(url);
  o.state = state;
  o.resend_interval = absl::Seconds(30);
  o.batch_delay = absl::Milliseconds(10);
  o.backoff = {absl::Milliseconds(50), absl::Milliseconds(200), 2.0, 0.2};
  return o;
}

Incident Resolved(Incident inc, absl::Duration after = absl::Milliseconds(300)) {
  inc.resolved = inc.opened + after;
  inc.updated = *inc.resolved;
  inc.resolution = "link up";
  ++inc.revision;
  return inc;
}

// Per alert (by ringside_incident_key) in the order the receiver got them: "firing" or
// "resolved", with the time of the request.
std::vector<std::pair<std::string, absl::Time>> AlertStates(
    const std::vector<testing::HttpReceiver::Request>& requests, const std::string& key) {
  std::vector<std::pair<std::string, absl::Time>> out;
  for (const auto& r : requests) {
    if (r.answered < 200 || r.answered >= 300) continue;
    for (const auto& a : nlohmann::json::parse(r.body)) {
      if (a["labels"].value("ringside_incident_key", "") != key) continue;
      out.emplace_back(a.contains("endsAt") ? "resolved" : "firing", r.received);
    }
  }
  return out;
}

TEST(AlertsAlertmanagerSenderTest, OpenedAndResolvedTogetherIsSentFiringFirst) {
  testing::HttpReceiver am;
  auto state = DeliveryState::Open("");
  ASSERT_TRUE(state.ok());
  SenderOptions o = AmOptions(am.url(""), state->get());
  o.min_firing = absl::ZeroDuration();
  AlertmanagerSender sender(o);
  const Incident opened = Flapping(7, 1);
  // Both changes inside one batch delay: before, only the resolution went out.
  sender.Enqueue({IncidentChangeType::kOpened, opened});
  sender.Enqueue({IncidentChangeType::kResolved, Resolved(opened)});
  const std::string key = analysis::StableIncidentKey(opened);
  ASSERT_TRUE(testing::Eventually(
      [&] { return AlertStates(am.Requests(), key).size() >= 2; }, absl::Seconds(10)));
  absl::SleepFor(absl::Milliseconds(300));  // room for a (wrong) repeat
  auto states = AlertStates(am.Requests(), key);
  ASSERT_EQ(states.size(), 2u);
  EXPECT_EQ(states[0].first, "firing");
  EXPECT_EQ(states[1].first, "resolved");
  EXPECT_EQ(sender.stats().queue_length.load(), 0);
}

// A severity that escalates changes the alert's labels, and Alertmanager tells alerts apart by
// their labels: the old label set is sent resolved with the new one, once, so it does not fire on
// until Alertmanager's resolve_timeout (and page its resolution only then).
TEST(AlertsAlertmanagerSenderTest, AnOldLabelSetIsResolvedWhenTheLabelsChange) {
  testing::HttpReceiver am;
  auto state = DeliveryState::Open("");
  ASSERT_TRUE(state.ok());
  SenderOptions o = AmOptions(am.url(""), state->get());
  o.resend_interval = absl::Milliseconds(300);
  AlertmanagerSender sender(o);
  Incident warning = Flapping(7, 1);
  warning.severity = analysis::Severity::kWarning;
  sender.Enqueue({IncidentChangeType::kOpened, warning});
  ASSERT_TRUE(testing::Eventually([&] { return !am.Requests().empty(); }, absl::Seconds(10)));
  Incident critical = Flapping(7, 2);
  critical.severity = analysis::Severity::kCritical;
  sender.Enqueue({IncidentChangeType::kUpdated, critical});
  // Then re-sends: the old labels go once, the new ones every time. Wait for the new labels in
  // two POSTs (not for a count of POSTs: on a slow run, re-sends of the old labels alone may come
  // first).
  const auto posts_with_critical = [&] {
    int n = 0;
    for (const auto& r : am.Requests()) {
      for (const auto& a : nlohmann::json::parse(r.body)) {
        if (a["labels"].value("severity", "") == "critical") {
          ++n;
          break;
        }
      }
    }
    return n;
  };
  ASSERT_TRUE(testing::Eventually([&] { return posts_with_critical() >= 2; }, absl::Seconds(10)));
  int warning_firing = 0, warning_resolved = 0, critical_firing = 0, critical_resolved = 0;
  bool resolved_with_new = false;
  for (const auto& r : am.Requests()) {
    bool has_critical = false, has_resolved_warning = false;
    for (const auto& a : nlohmann::json::parse(r.body)) {
      const bool resolved = a.contains("endsAt");
      if (a["labels"].value("severity", "") == "warning") {
        ++(resolved ? warning_resolved : warning_firing);
        has_resolved_warning = has_resolved_warning || resolved;
      } else {
        ++(resolved ? critical_resolved : critical_firing);
        has_critical = true;
      }
    }
    resolved_with_new = resolved_with_new || (has_critical && has_resolved_warning);
  }
  EXPECT_GE(warning_firing, 1);
  EXPECT_EQ(warning_resolved, 1);
  EXPECT_TRUE(resolved_with_new) << "the old labels end in the POST that brings the new ones";
  EXPECT_GE(critical_firing, 2);
  EXPECT_EQ(critical_resolved, 0);
}

TEST(AlertsAlertmanagerSenderTest, ResolutionIsHeldForTheMinimumFiringTimePerKind) {
  testing::HttpReceiver am;
  auto state = DeliveryState::Open("");
  ASSERT_TRUE(state.ok());
  SenderOptions o = AmOptions(am.url(""), state->get());
  o.min_firing = absl::Milliseconds(1500);
  o.min_firing_for = {{IncidentKind::kLinkDown, absl::ZeroDuration()}};
  o.resend_interval = absl::Milliseconds(400);  // firing re-sent while its resolution waits
  AlertmanagerSender sender(o);
  const Incident flapping = Flapping(7, 1);
  Incident down = Flapping(8, 1);
  down.kind = IncidentKind::kLinkDown;
  for (const Incident& inc : {flapping, down}) {
    sender.Enqueue({IncidentChangeType::kOpened, inc});
    sender.Enqueue({IncidentChangeType::kResolved, Resolved(inc)});
  }
  const std::string flapping_key = analysis::StableIncidentKey(flapping);
  const std::string down_key = analysis::StableIncidentKey(down);
  ASSERT_TRUE(testing::Eventually(
      [&] {
        auto s = AlertStates(am.Requests(), flapping_key);
        return !s.empty() && s.back().first == "resolved";
      },
      absl::Seconds(15)));
  auto f = AlertStates(am.Requests(), flapping_key);
  auto d = AlertStates(am.Requests(), down_key);
  // link_down (no minimum): firing, then resolved in the next request.
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].first, "firing");
  EXPECT_EQ(d[1].first, "resolved");
  // link_flapping: firing (and re-sent firing) for at least 1.5 s, then resolved once.
  ASSERT_GE(f.size(), 3u);
  EXPECT_EQ(f.front().first, "firing");
  for (size_t i = 0; i + 1 < f.size(); ++i) EXPECT_EQ(f[i].first, "firing") << i;
  EXPECT_GE(f.back().second - f.front().second, absl::Milliseconds(1500));
  absl::SleepFor(absl::Milliseconds(600));  // more than a resend interval: nothing more
  EXPECT_EQ(AlertStates(am.Requests(), flapping_key).size(), f.size());
  EXPECT_EQ(sender.stats().queue_length.load(), 0);
}

TEST(AlertsAlertmanagerSenderTest, NeverAResolutionAloneAfterARestart) {
  testing::TempDir dir;
  testing::HttpReceiver am;
  auto state = DeliveryState::Open(dir.path() + "/state");
  ASSERT_TRUE(state.ok());
  // Incident 7 reached Alertmanager firing before the "restart" and resolved since; incident 9
  // opened and resolved while nothing reached Alertmanager (not in the delivery state).
  const Incident fired = Flapping(7, 1);
  ASSERT_TRUE((*state)
                  ->Record("alertmanager:k", 7,
                           {1, IncidentChangeType::kOpened, absl::Now() - absl::Seconds(1)})
                  .ok());
  SenderOptions o = AmOptions(am.url(""), state->get());
  o.min_firing = absl::Milliseconds(800);
  AlertmanagerSender sender(o);
  Incident never = Flapping(9, 1);
  never.opened += absl::Seconds(9);  // its own alert (the key has the opening time)
  sender.Reconcile({}, [&](uint64_t id) -> std::optional<Incident> {
    return Resolved(id == 7 ? fired : never);
  });
  ASSERT_TRUE(testing::Eventually(
      [&] { return !AlertStates(am.Requests(), analysis::StableIncidentKey(fired)).empty(); },
      absl::Seconds(10)));
  absl::SleepFor(absl::Milliseconds(300));
  // 7 fired 1 s ago, held 0.8 s: its resolution goes out at once, alone (it already fired).
  auto s7 = AlertStates(am.Requests(), analysis::StableIncidentKey(fired));
  ASSERT_EQ(s7.size(), 1u);
  EXPECT_EQ(s7[0].first, "resolved");
  // 9 is unknown to the state: Reconcile sends nothing for it (no resolution alone).
  EXPECT_TRUE(AlertStates(am.Requests(), analysis::StableIncidentKey(never)).empty());

  // A resolution of an incident this sender never saw open is sent firing first, then resolved
  // after the minimum firing time.
  Incident unseen = Flapping(11, 1);
  unseen.opened += absl::Seconds(11);
  sender.Enqueue({IncidentChangeType::kResolved, Resolved(unseen)});
  const std::string key = analysis::StableIncidentKey(unseen);
  ASSERT_TRUE(testing::Eventually(
      [&] {
        auto s = AlertStates(am.Requests(), key);
        return !s.empty() && s.back().first == "resolved";
      },
      absl::Seconds(10)));
  auto s11 = AlertStates(am.Requests(), key);
  ASSERT_EQ(s11.size(), 2u);
  EXPECT_EQ(s11[0].first, "firing");
  EXPECT_GE(s11[1].second - s11[0].second, absl::Milliseconds(800));
  // Its firing alert is the open incident: no endsAt, no resolution annotation.
  for (const auto& r : am.Requests()) {
    for (const auto& a : nlohmann::json::parse(r.body)) {
      if (a["labels"].value("ringside_incident_key", "") == key && !a.contains("endsAt")) {
        EXPECT_FALSE(a["annotations"].contains("resolution"));
      }
    }
  }
}

TEST_F(AlertsWebhookSenderTest, AResolutionOfAnIncidentTheReceiverNeverSawGoesAfterItsOpening) {
  testing::HttpReceiver receiver;
  auto state = DeliveryState::Open("");
  ASSERT_TRUE(state.ok());
  WebhookSender sender(Options(receiver.url(), state->get()));
  // The receiver never got incident 5's `opened` (dropped, or raised before this sender).
  sender.Enqueue(Change(IncidentChangeType::kResolved, 5, 3));
  ASSERT_TRUE(receiver.WaitForAccepted(2, absl::Seconds(10)));
  absl::SleepFor(absl::Milliseconds(300));
  std::vector<testing::HttpReceiver::Request> got = receiver.Accepted();
  ASSERT_EQ(got.size(), 2u);
  auto first = nlohmann::json::parse(got[0].body);
  auto second = nlohmann::json::parse(got[1].body);
  EXPECT_EQ(first["type"], "opened");
  EXPECT_FALSE(first["incident"].contains("resolved") && !first["incident"]["resolved"].is_null());
  EXPECT_EQ(first["incident"]["revision"], 2);
  EXPECT_EQ(second["type"], "resolved");
  EXPECT_EQ(second["incident"]["revision"], 3);
}

TEST(AlertsDispatcherTest, MinFiringForParses) {
  auto m = ParseMinFiringFor("link_down=60s, straggler=0s");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->size(), 2u);
  EXPECT_EQ(m->at(IncidentKind::kLinkDown), absl::Seconds(60));
  EXPECT_EQ(m->at(IncidentKind::kStraggler), absl::ZeroDuration());
  EXPECT_TRUE(ParseMinFiringFor("")->empty());
  for (const char* bad : {"link_down", "nosuch=1s", "link_down=soon", "link_down=-1s",
                          "link_down=1s,link_down=2s"}) {
    EXPECT_FALSE(ParseMinFiringFor(bad).ok()) << bad;
  }
  SenderOptions o;
  o.min_firing = absl::Seconds(45);
  o.min_firing_for = *m;
  EXPECT_EQ(MinFiring(o, IncidentKind::kLinkDown), absl::Seconds(60));
  EXPECT_EQ(MinFiring(o, IncidentKind::kPauseStorm), absl::Seconds(45));
  AlertOptions a;
  a.alertmanager_urls = {"http://127.0.0.1:1"};
  a.batch_delay = absl::Milliseconds(-1);
  EXPECT_FALSE(AlertDispatcher::Start(a).ok());
  a.batch_delay = absl::ZeroDuration();
  a.min_firing = absl::Seconds(-1);
  EXPECT_FALSE(AlertDispatcher::Start(a).ok());
}

// --- metrics
// --------------------------------------------------------------------------------------

TEST(AlertsMetricsTest, CollectEmitsOnlyCatalogFamilies) {
  AlertOptions o;
  o.alertmanager_urls = {"http://127.0.0.1:1"};
  o.webhook_urls = {"http://127.0.0.1:1/a", "http://127.0.0.1:1/b"};
  o.webhook_secret = "k";
  auto d = AlertDispatcher::Start(o);
  ASSERT_TRUE(d.ok()) << d.status();
  std::set<std::string> catalog;
  for (const AggregatorMetricSpec& m : AggregatorMetricCatalog()) {
    catalog.insert(std::string(m.name));
  }
  std::set<std::string> receivers;
  std::vector<prometheus::MetricFamily> families = (*d)->metrics()->Collect();
  EXPECT_GE(families.size(), 5u);
  for (const prometheus::MetricFamily& f : families) {
    EXPECT_TRUE(catalog.count(f.name)) << f.name;
    for (const prometheus::ClientMetric& m : f.metric) {
      for (const auto& l : m.label) {
        if (l.name == "receiver") receivers.insert(l.value);
      }
    }
  }
  // Receivers are named by type and host:port, never by path (it may hold a token).
  EXPECT_EQ(receivers, (std::set<std::string>{"alertmanager:127.0.0.1:1", "webhook:127.0.0.1:1",
                                              "webhook:127.0.0.1:1#2"}));
}

// --- HTTPS (libcurl) against a loopback TLS receiver with a test CA ---------------------------

TEST(AlertsHttpTest, BodyCapAndNoRedirects) {
  testing::HttpReceiver receiver;  // answers "ok" (2 bytes)
  HttpClientRequest req;
  req.method = "POST";
  req.url = *ParseHttpUrl(receiver.url("/cap"));
  req.body = "{}";
  req.timeout = absl::Seconds(5);
  req.max_response_bytes = 1;
  auto r = SendHttp(req);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "larger than 1 bytes")) << r.status();
  // A 3xx is an answer, not something to follow.
  receiver.SetStatus(302);
  req.max_response_bytes = 1 << 20;
  r = SendHttp(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 302);
  EXPECT_EQ(r->body, "ok");
  // What libcurl would add on its own for a POST is not sent.
  const testing::HttpReceiver::Request last = receiver.Requests().back();
  EXPECT_EQ(last.headers.count("content-type"), 0u);
  EXPECT_EQ(last.headers.count("expect"), 0u);
  EXPECT_EQ(last.headers.at("content-length"), "2");
}

class AlertsHttpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pki = testing::TestPki::Create(dir_.path(), "alerts");
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = std::make_unique<testing::TestPki>(std::move(*pki));
    auto server = pki_->IssueServer("hooks");
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *server;
    std::filesystem::create_directory(dir_.path() + "/other");
    auto other = testing::TestPki::Create(dir_.path() + "/other", "other");
    ASSERT_TRUE(other.ok()) << other.status();
    other_ca_ = other->ca_cert();
  }
  std::unique_ptr<testing::TlsReceiver> Receiver(const std::string& client_ca = "") {
    auto r = testing::TlsReceiver::Start({server_.cert, server_.key, client_ca, 200});
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? std::move(*r) : nullptr;
  }
  HttpClientRequest Post(const std::string& url) {
    HttpClientRequest req;
    req.method = "POST";
    req.url = *ParseHttpUrl(url);
    req.headers = {{"Content-Type", "application/json"}};
    req.body = R"({"x":1})";
    req.timeout = absl::Seconds(5);
    return req;
  }

  testing::TempDir dir_;
  std::unique_ptr<testing::TestPki> pki_;
  testing::CertPaths server_;
  std::string other_ca_;
};

TEST_F(AlertsHttpsTest, DeliversWithTheTestCa) {
  auto receiver = Receiver();
  ASSERT_NE(receiver, nullptr);
  HttpClientRequest req = Post(receiver->url("/hook?t=1"));
  req.tls.ca_file = pki_->ca_cert();
  auto r = SendHttp(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "ok");
  EXPECT_EQ(r->headers.at("content-length"), "2");
  std::vector<testing::TlsReceiver::Request> got = receiver->Requests();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].method, "POST");
  EXPECT_EQ(got[0].path, "/hook?t=1");
  EXPECT_EQ(got[0].body, R"({"x":1})");
  EXPECT_TRUE(got[0].client_cn.empty());
}

TEST_F(AlertsHttpsTest, RefusesAServerItCannotVerify) {
  auto receiver = Receiver();
  ASSERT_NE(receiver, nullptr);
  // Signed by a CA the client was not given; and the system store does not know the test CA.
  for (const std::string& ca : {other_ca_, std::string()}) {
    HttpClientRequest req = Post(receiver->url());
    req.tls.ca_file = ca;
    auto r = SendHttp(req);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
    EXPECT_TRUE(absl::StrContains(r.status().message(), "failed verification")) << r.status();
    EXPECT_TRUE(absl::StrContains(r.status().message(), ca.empty() ? "system store" : ca))
        << r.status();
  }
  EXPECT_TRUE(receiver->Requests().empty());  // nothing was sent in clear or otherwise
  // (the receiver counts the second refusal on its own thread, possibly after SendHttp returned)
  EXPECT_TRUE(testing::Eventually([&] { return receiver->handshake_failures() >= 2; },
                                  absl::Seconds(5)))
      << receiver->handshake_failures();
  // A CA file that is not there: the message says so.
  HttpClientRequest req = Post(receiver->url());
  req.tls.ca_file = dir_.path() + "/missing.pem";
  auto r = SendHttp(req);
  EXPECT_FALSE(r.ok());
}

TEST_F(AlertsHttpsTest, ClientCertificateForMutualTls) {
  auto receiver = Receiver(pki_->ca_cert());
  ASSERT_NE(receiver, nullptr);
  HttpClientRequest req = Post(receiver->url("/api/v2/alerts"));
  req.tls.ca_file = pki_->ca_cert();
  auto refused = SendHttp(req);  // no client certificate
  EXPECT_FALSE(refused.ok() && refused->status == 200);
  EXPECT_TRUE(receiver->Requests().empty());
  auto client = pki_->IssueClient("ringside-aggregator");
  ASSERT_TRUE(client.ok()) << client.status();
  req.tls.client_cert = client->cert;
  req.tls.client_key = client->key;
  auto r = SendHttp(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  std::vector<testing::TlsReceiver::Request> got = receiver->Requests();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].client_cn, "ringside-aggregator");
}

// Through the dispatcher (as the aggregator wires --alert-ca): a webhook over HTTPS is delivered
// with the right CA; with the wrong one every attempt fails, is counted in
// ringside_aggregator_alert_deliveries_total{result="failed"} and logged with the reason.
TEST_F(AlertsHttpsTest, DispatcherDeliversOrCountsAndLogsTheRefusal) {
  auto receiver = Receiver();
  ASSERT_NE(receiver, nullptr);
  for (const bool right_ca : {true, false}) {
    SCOPED_TRACE(right_ca ? "right CA" : "wrong CA");
    absl::Mutex mu;
    std::vector<std::string> logs;
    AlertOptions o;
    o.webhook_urls = {receiver->url()};
    o.webhook_secret = "k";
    o.http_timeout = absl::Seconds(5);
    o.backoff = {absl::Milliseconds(20), absl::Milliseconds(50), 2.0, 0.2};
    o.tls.ca_file = right_ca ? pki_->ca_cert() : other_ca_;
    o.log = [&](const std::string& m) {
      absl::MutexLock l(&mu);
      logs.push_back(m);
    };
    auto d = AlertDispatcher::Start(o);
    ASSERT_TRUE(d.ok()) << d.status();
    const size_t before = receiver->Requests().size();
    (*d)->OnChanges({IncidentChange{IncidentChangeType::kOpened, Flapping(1, 1)}});
    const AlertSender& sender = *(*d)->senders().at(0);
    if (right_ca) {
      ASSERT_TRUE(testing::Eventually([&] { return sender.stats().delivered.load() == 1; },
                                      absl::Seconds(10)));
      ASSERT_EQ(receiver->Requests().size(), before + 1);
      EXPECT_TRUE(absl::StrContains(receiver->Requests().back().head, "X-Ringside-Signature"));
      EXPECT_EQ(sender.stats().failed.load(), 0u);
    } else {
      ASSERT_TRUE(testing::Eventually([&] { return sender.stats().failed.load() >= 2; },
                                      absl::Seconds(10)));
      (*d)->Stop();
      EXPECT_EQ(sender.stats().delivered.load(), 0u);
      EXPECT_EQ(receiver->Requests().size(), before);
      double failed = 0;
      for (const prometheus::MetricFamily& f : (*d)->metrics()->Collect()) {
        if (f.name != "ringside_aggregator_alert_deliveries_total") continue;
        for (const prometheus::ClientMetric& m : f.metric) {
          for (const auto& l : m.label) {
            if (l.name == "result" && l.value == "failed") failed = m.counter.value;
          }
        }
      }
      EXPECT_GE(failed, 2);
      absl::MutexLock l(&mu);
      auto failure = std::find_if(logs.begin(), logs.end(), [](const std::string& m) {
        return absl::StrContains(m, "delivery failed");
      });
      ASSERT_NE(failure, logs.end());
      EXPECT_TRUE(absl::StrContains(*failure, "failed verification")) << *failure;
      EXPECT_TRUE(absl::StrContains(*failure, other_ca_)) << *failure;
      std::fprintf(stderr, "logged: %s\n", failure->c_str());
    }
  }
}

TEST(AlertsTlsFlagsTest, ClientCertNeedsKeyAndFilesMustBeReadable) {
  testing::TempDir dir;
  AlertOptions o;
  o.alertmanager_urls = {"https://127.0.0.1:1"};
  o.tls.client_cert = dir.path() + "/c.pem";
  auto d = AlertDispatcher::Start(o);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(d.status().message(), "--alert-client-key")) << d.status();
  o.tls = {};
  o.tls.ca_file = dir.path() + "/missing-ca.pem";
  d = AlertDispatcher::Start(o);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(d.status().message(), "--alert-ca: cannot read")) << d.status();
}

}  // namespace
}  // namespace ringside::daemon
