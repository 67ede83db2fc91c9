#include "analysis/incidents.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analysis/incident_store.h"

namespace ringside::analysis {

// --- names ------------------------------------------------------------------------------------

std::optional<IncidentKind> ParseIncidentKind(absl::string_view name) {
  for (IncidentKind k :
       {IncidentKind::kLinkFlapping, IncidentKind::kLinkDown, IncidentKind::kLinkDegraded,
        IncidentKind::kPauseStorm, IncidentKind::kCongestion, IncidentKind::kStraggler,
        IncidentKind::kJobSlowdown, IncidentKind::kGpuThrottled, IncidentKind::kGpuXid,
        IncidentKind::kGpuMemoryError, IncidentKind::kGpuPcieDegraded}) {
    if (IncidentKindName(k) == name) return k;
  }
  return std::nullopt;
}

std::optional<Severity> ParseSeverity(absl::string_view name) {
  for (Severity s : {Severity::kInfo, Severity::kWarning, Severity::kCritical}) {
    if (SeverityName(s) == name) return s;
  }
  return std::nullopt;
}

bool IsFabricKind(IncidentKind kind) {
  return kind != IncidentKind::kStraggler && kind != IncidentKind::kJobSlowdown &&
         !IsGpuKind(kind);
}

bool IsGpuKind(IncidentKind kind) {
  return kind == IncidentKind::kGpuThrottled || kind == IncidentKind::kGpuXid ||
         kind == IncidentKind::kGpuMemoryError || kind == IncidentKind::kGpuPcieDegraded;
}

absl::string_view IncidentChangeTypeName(IncidentChangeType t) {
  switch (t) {
    case IncidentChangeType::kOpened:
      return "opened";
    case IncidentChangeType::kUpdated:
      return "updated";
    case IncidentChangeType::kResolved:
      return "resolved";
  }
  return "unknown";
}

Finding Incident::AsFinding() const {
  Finding f;
  f.kind = kind;
  f.entity = entity;
  f.severity = severity;
  f.at = updated;
  f.active = open();
  f.evidence = evidence;
  f.summary = summary;
  return f;
}

bool operator==(const Incident& a, const Incident& b) {
  return a.id == b.id && a.kind == b.kind && a.severity == b.severity && a.key == b.key &&
         a.entity == b.entity && a.opened == b.opened && a.updated == b.updated &&
         a.resolved == b.resolved && a.evidence == b.evidence && a.summary == b.summary &&
         a.resolution == b.resolution && a.causes == b.causes && a.affected == b.affected &&
         a.revision == b.revision;
}

// --- JSON -------------------------------------------------------------------------------------

std::string JsonQuote(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\u%04x", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

namespace {

std::string JsonNumber(double d) {
  if (!std::isfinite(d)) return "null";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), d);
  if (ec != std::errc()) return "null";
  return std::string(buf, end);
}

std::string JsonTime(absl::Time t) {
  return JsonQuote(absl::FormatTime(absl::RFC3339_full, t, absl::UTCTimeZone()));
}

}  // namespace

std::string LabelsJson(const std::map<std::string, std::string>& labels) {
  std::string out = "{";
  for (const auto& [k, v] : labels) {
    if (out.size() > 1) out += ',';
    absl::StrAppend(&out, JsonQuote(k), ":", JsonQuote(v));
  }
  return out + "}";
}

std::string EvidenceJson(const std::map<std::string, double>& evidence) {
  std::string out = "{";
  for (const auto& [k, v] : evidence) {
    if (out.size() > 1) out += ',';
    absl::StrAppend(&out, JsonQuote(k), ":", JsonNumber(v));
  }
  return out + "}";
}

std::string CausesJson(const std::vector<CauseLink>& causes) {
  std::string out = "[";
  for (const CauseLink& c : causes) {
    if (out.size() > 1) out += ',';
    absl::StrAppend(&out, "{\"incident_id\":", c.incident_id, ",\"kind\":", JsonQuote(c.kind),
                    ",\"scope\":", JsonQuote(c.scope), ",\"entity\":", LabelsJson(c.entity),
                    ",\"summary\":", JsonQuote(c.summary));
    // Only when set: causes recorded before keys existed keep their JSON.
    if (!c.key.empty()) absl::StrAppend(&out, ",\"key\":", JsonQuote(c.key));
    if (!c.shard.empty()) absl::StrAppend(&out, ",\"shard\":", JsonQuote(c.shard));
    if (!c.evidence.empty()) absl::StrAppend(&out, ",\"evidence\":", EvidenceJson(c.evidence));
    out += "}";
  }
  return out + "]";
}

std::string AffectedJson(const std::vector<AffectedJob>& affected) {
  std::string out = "[";
  for (const AffectedJob& a : affected) {
    if (out.size() > 1) out += ',';
    absl::StrAppend(&out, "{\"job\":", JsonQuote(a.job), ",\"ranks\":[");
    for (size_t i = 0; i < a.ranks.size(); ++i) absl::StrAppend(&out, i ? "," : "", a.ranks[i]);
    out += "],\"nodes\":[";
    for (size_t i = 0; i < a.nodes.size(); ++i) {
      absl::StrAppend(&out, i ? "," : "", JsonQuote(a.nodes[i]));
    }
    out += "]";
    if (!a.pods.empty()) {  // only then: incidents without pods keep their JSON
      out += ",\"pods\":[";
      for (size_t i = 0; i < a.pods.size(); ++i) {
        absl::StrAppend(&out, i ? "," : "", JsonQuote(a.pods[i]));
      }
      out += "]";
    }
    out += "}";
  }
  return out + "]";
}

std::string StableIncidentKey(IncidentKind kind, const std::map<std::string, std::string>& entity,
                              absl::Time opened) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a 64 offset basis
  auto mix = [&h](absl::string_view bytes) {
    for (unsigned char c : bytes) {
      h ^= c;
      h *= 0x100000001b3ULL;  // FNV-1a 64 prime
    }
  };
  mix("ringside-incident-v1\n");
  mix(IncidentKindName(kind));
  mix("\n");
  for (const auto& [name, value] : entity) {
    mix(name);
    mix("=");
    mix(value);
    mix("\n");
  }
  mix(absl::StrCat(absl::ToUnixNanos(opened)));
  return absl::StrFormat("%016x", h);
}

std::string StableIncidentKey(const Incident& incident) {
  return StableIncidentKey(incident.kind, incident.entity, incident.opened);
}

std::string IncidentJson(const Incident& inc) {
  return absl::StrCat(
      "{\"id\":", inc.id, ",\"key\":", JsonQuote(StableIncidentKey(inc)), ",\"kind\":", JsonQuote(IncidentKindName(inc.kind)),
      ",\"severity\":", JsonQuote(SeverityName(inc.severity)),
      ",\"entity\":", LabelsJson(inc.entity), ",\"opened\":", JsonTime(inc.opened),
      ",\"updated\":", JsonTime(inc.updated),
      ",\"resolved\":", inc.resolved ? JsonTime(*inc.resolved) : std::string("null"),
      ",\"evidence\":", EvidenceJson(inc.evidence), ",\"summary\":", JsonQuote(inc.summary),
      ",\"resolution\":", JsonQuote(inc.resolution), ",\"causes\":", CausesJson(inc.causes),
      ",\"affected\":", AffectedJson(inc.affected), ",\"revision\":", inc.revision, "}");
}

// --- the manager ------------------------------------------------------------------------------

IncidentManager::IncidentManager(IncidentStore* store, IncidentOptions options)
    : store_(store), options_(options) {}

absl::Status IncidentManager::Load(absl::Time now) {
  loaded_at_ = now;
  if (store_ == nullptr) return absl::OkStatus();
  absl::StatusOr<uint64_t> next = store_->NextId();
  if (!next.ok()) return next.status();
  next_id_ = std::max(next_id_, *next);
  absl::StatusOr<std::vector<Incident>> open = store_->LoadOpen();
  if (!open.ok()) return open.status();
  for (Incident& inc : *open) {
    next_id_ = std::max(next_id_, inc.id + 1);
    if (by_key_.count(inc.key)) continue;  // cannot happen with a store that keeps keys unique
    by_key_[inc.key] = inc.id;
    unconfirmed_.insert(inc.id);
    open_[inc.id] = std::move(inc);
  }
  return absl::OkStatus();
}

absl::Status IncidentManager::Save(const Incident& incident) {
  if (store_ == nullptr) return absl::OkStatus();
  absl::Status s = store_->Put(incident);
  if (!s.ok()) {
    unsaved_[incident.id] = incident;
  } else {
    unsaved_.erase(incident.id);
  }
  return s;
}

absl::Status IncidentManager::Flush() {
  if (store_ == nullptr || unsaved_.empty()) return absl::OkStatus();
  std::map<uint64_t, Incident> pending;
  pending.swap(unsaved_);
  absl::Status first;
  for (auto& [id, inc] : pending) {
    absl::Status s = store_->Put(inc);
    if (!s.ok()) {
      unsaved_[id] = std::move(inc);
      if (first.ok()) first = s;
    }
  }
  return first;
}

Incident* IncidentManager::Mutable(uint64_t id) {
  if (auto it = open_.find(id); it != open_.end()) return &it->second;
  for (Incident& inc : resolved_) {
    if (inc.id == id) return &inc;
  }
  return nullptr;
}

const Incident* IncidentManager::Get(uint64_t id) const {
  return const_cast<IncidentManager*>(this)->Mutable(id);
}

const Incident* IncidentManager::FindOpen(absl::string_view key) const {
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return nullptr;
  auto o = open_.find(it->second);
  return o == open_.end() ? nullptr : &o->second;
}

std::vector<const Incident*> IncidentManager::Open() const {
  std::vector<const Incident*> out;
  out.reserve(open_.size());
  for (const auto& [id, inc] : open_) out.push_back(&inc);
  return out;
}

std::vector<const Incident*> IncidentManager::RecentlyResolved() const {
  std::vector<const Incident*> out;
  for (auto it = resolved_.rbegin(); it != resolved_.rend(); ++it) out.push_back(&*it);
  return out;
}

void IncidentManager::Confirm(uint64_t id) { unconfirmed_.erase(id); }

void IncidentManager::Resolve(Incident& inc, absl::Time at, std::string resolution,
                              std::vector<IncidentChange>* changes, absl::Status& status) {
  inc.resolved = std::max(at, inc.opened);
  inc.updated = std::max(inc.updated, *inc.resolved);
  inc.resolution = std::move(resolution);
  ++inc.revision;
  const uint64_t id = inc.id;
  by_key_.erase(inc.key);
  unconfirmed_.erase(id);
  resolved_.push_back(std::move(inc));
  open_.erase(id);
  while (resolved_.size() > options_.keep_resolved) resolved_.pop_front();
  const Incident& done = resolved_.back();
  if (absl::Status s = Save(done); !s.ok() && status.ok()) status = s;
  if (changes) changes->push_back({IncidentChangeType::kResolved, done});
}

absl::Status IncidentManager::Apply(const Finding& f, std::vector<IncidentChange>* changes) {
  absl::Status status = Flush();
  if (absl::Status s = ApplyOne(f, changes); !s.ok() && status.ok()) status = s;
  return status;
}

absl::Status IncidentManager::ApplyOne(const Finding& f, std::vector<IncidentChange>* changes) {
  absl::Status status;
  const std::string key = FindingKey(f);
  auto it = by_key_.find(key);
  if (!f.active) {
    if (it == by_key_.end()) return status;  // nothing open to resolve
    Incident& inc = open_.at(it->second);
    for (const auto& [k, v] : f.evidence) inc.evidence[k] = v;
    Resolve(inc, f.at, f.summary, changes, status);
    return status;
  }
  if (it == by_key_.end()) {
    Incident inc;
    inc.id = next_id_++;
    inc.kind = f.kind;
    inc.severity = f.severity;
    inc.key = key;
    inc.entity = f.entity;
    inc.opened = f.at;
    inc.updated = f.at;
    inc.evidence = f.evidence;
    inc.summary = f.summary;
    inc.revision = 1;
    const uint64_t id = inc.id;
    by_key_[key] = id;
    Incident& saved = open_[id];
    saved = std::move(inc);
    if (absl::Status s = Save(saved); !s.ok() && status.ok()) status = s;
    if (changes) changes->push_back({IncidentChangeType::kOpened, saved});
    return status;
  }
  Incident& inc = open_.at(it->second);
  unconfirmed_.erase(inc.id);
  inc.updated = std::max(inc.updated, f.at);
  inc.severity = std::max(inc.severity, f.severity);  // escalates while open, never de-escalates
  for (const auto& [k, v] : f.evidence) inc.evidence[k] = v;
  if (!f.summary.empty()) inc.summary = f.summary;
  ++inc.revision;
  if (absl::Status s = Save(inc); !s.ok() && status.ok()) status = s;
  if (changes) changes->push_back({IncidentChangeType::kUpdated, inc});
  return status;
}

absl::Status IncidentManager::Apply(const std::vector<Finding>& findings,
                                    std::vector<IncidentChange>* changes) {
  absl::Status first = Flush();  // once: a store that is down is not retried per finding
  for (const Finding& f : findings) {
    absl::Status s = ApplyOne(f, changes);
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

absl::Status IncidentManager::SetCauses(uint64_t id, std::vector<CauseLink> causes, absl::Time at,
                                        std::vector<IncidentChange>* changes) {
  Incident* inc = Mutable(id);
  if (inc == nullptr) return absl::NotFoundError(absl::StrCat("no incident ", id, " in memory"));
  if (inc->causes == causes) return absl::OkStatus();
  inc->causes = std::move(causes);
  inc->updated = std::max(inc->updated, at);
  ++inc->revision;
  absl::Status s = Save(*inc);
  if (changes) changes->push_back({IncidentChangeType::kUpdated, *inc});
  return s;
}

absl::Status IncidentManager::SetAffected(uint64_t id, std::vector<AffectedJob> affected,
                                          absl::Time at, std::vector<IncidentChange>* changes) {
  Incident* inc = Mutable(id);
  if (inc == nullptr) return absl::NotFoundError(absl::StrCat("no incident ", id, " in memory"));
  if (inc->affected == affected) return absl::OkStatus();
  inc->affected = std::move(affected);
  inc->updated = std::max(inc->updated, at);
  ++inc->revision;
  absl::Status s = Save(*inc);
  if (changes) changes->push_back({IncidentChangeType::kUpdated, *inc});
  return s;
}

absl::Status IncidentManager::Advance(absl::Time now, std::vector<IncidentChange>* changes) {
  absl::Status status = Flush();
  if (unconfirmed_.empty() || now - loaded_at_ < options_.unconfirmed_timeout) return status;
  std::vector<uint64_t> expired(unconfirmed_.begin(), unconfirmed_.end());
  for (uint64_t id : expired) {
    auto it = open_.find(id);
    if (it == open_.end()) {
      unconfirmed_.erase(id);
      continue;
    }
    it->second.evidence["unconfirmed_after_restart"] = 1;
    Resolve(it->second, now,
            absl::StrCat("not confirmed within ",
                         absl::FormatDuration(options_.unconfirmed_timeout), " after a restart"),
            changes, status);
  }
  return status;
}

// --- the in-memory store ----------------------------------------------------------------------

bool Matches(const IncidentQuery& q, const Incident& inc) {
  if (q.open_only && !inc.open()) return false;
  if (q.kind && inc.kind != *q.kind) return false;
  return inc.updated >= q.since;
}

absl::Status MemoryIncidentStore::Put(const Incident& incident) {
  absl::MutexLock lock(&mu_);
  if (incident.open()) {
    for (const auto& [id, other] : incidents_) {
      if (id != incident.id && other.open() && other.key == incident.key) {
        return absl::AlreadyExistsError(
            absl::StrCat("incident ", other.id, " is already open for ", incident.key));
      }
    }
  }
  incidents_[incident.id] = incident;
  next_id_ = std::max(next_id_, incident.id + 1);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Incident>> MemoryIncidentStore::LoadOpen() {
  absl::MutexLock lock(&mu_);
  std::vector<Incident> out;
  for (const auto& [id, inc] : incidents_) {
    if (inc.open()) out.push_back(inc);
  }
  return out;
}

absl::StatusOr<uint64_t> MemoryIncidentStore::NextId() {
  absl::MutexLock lock(&mu_);
  return next_id_;
}

absl::StatusOr<std::optional<Incident>> MemoryIncidentStore::Get(uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = incidents_.find(id);
  if (it == incidents_.end()) return std::optional<Incident>();
  return std::optional<Incident>(it->second);
}

absl::StatusOr<std::vector<Incident>> MemoryIncidentStore::List(const IncidentQuery& q) {
  absl::MutexLock lock(&mu_);
  std::vector<Incident> out;
  for (auto it = incidents_.rbegin(); it != incidents_.rend() && out.size() < q.limit; ++it) {
    if (Matches(q, it->second)) out.push_back(it->second);
  }
  return out;
}

size_t MemoryIncidentStore::size() const {
  absl::MutexLock lock(&mu_);
  return incidents_.size();
}

}  // namespace ringside::analysis
