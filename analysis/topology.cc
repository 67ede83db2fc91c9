#include "analysis/topology.h"

#include <algorithm>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ringside::analysis {

namespace {

absl::string_view Trim(absl::string_view s) { return absl::StripAsciiWhitespace(s); }

bool IsHex(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// "0x5442ba00003080", "5442ba00003080" → "0x005442ba00003080"; "" when not a GUID.
std::string NormalizeGuid(absl::string_view s) {
  s = Trim(s);
  if (absl::StartsWithIgnoreCase(s, "0x")) s.remove_prefix(2);
  if (!IsHex(s) || s.size() > 16) return "";
  std::string out = "0x";
  out.append(16 - s.size(), '0');
  out.append(absl::AsciiStrToLower(s));
  return out;
}

// The GUID in an ibnetdiscover node id ("S-0008f10400410015", "H-…"), or "".
std::string GuidOfId(absl::string_view id) {
  if (id.size() > 2 && (id[0] == 'S' || id[0] == 'H' || id[0] == 'R') && id[1] == '-') {
    return NormalizeGuid(id.substr(2));
  }
  return "";
}

// The first double-quoted string in `s`, if any.
std::optional<std::string> FirstQuoted(absl::string_view s) {
  size_t a = s.find('"');
  if (a == absl::string_view::npos) return std::nullopt;
  size_t b = s.find('"', a + 1);
  if (b == absl::string_view::npos) return std::nullopt;
  return std::string(s.substr(a + 1, b - a - 1));
}

class Cursor {
 public:
  explicit Cursor(absl::string_view s) : s_(s) {}
  void SkipSpace() {
    while (i_ < s_.size() && absl::ascii_isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool Eat(char c) {
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool Int(int& out) {
    size_t j = i_;
    while (j < s_.size() && absl::ascii_isdigit(static_cast<unsigned char>(s_[j]))) ++j;
    if (j == i_ || !absl::SimpleAtoi(s_.substr(i_, j - i_), &out)) return false;
    i_ = j;
    return true;
  }
  // Up to (not including) `c`; consumes `c`.
  bool Until(char c, absl::string_view& out) {
    size_t j = s_.find(c, i_);
    if (j == absl::string_view::npos) return false;
    out = s_.substr(i_, j - i_);
    i_ = j + 1;
    return true;
  }
  absl::string_view Token() {
    SkipSpace();
    size_t j = i_;
    while (j < s_.size() && !absl::ascii_isspace(static_cast<unsigned char>(s_[j]))) ++j;
    absl::string_view t = s_.substr(i_, j - i_);
    i_ = j;
    return t;
  }
  absl::string_view Rest() const { return s_.substr(std::min(i_, s_.size())); }
  bool Done() const { return i_ >= s_.size(); }

 private:
  absl::string_view s_;
  size_t i_ = 0;
};

bool StartsWithWord(absl::string_view line, absl::string_view word) {
  return absl::StartsWith(line, word) && line.size() > word.size() &&
         absl::ascii_isspace(static_cast<unsigned char>(line[word.size()]));
}

bool IsNodeHeader(absl::string_view line) {
  return StartsWithWord(line, "Switch") || StartsWithWord(line, "Ca") ||
         StartsWithWord(line, "Hca") || StartsWithWord(line, "Rt");
}

bool IsAttribute(absl::string_view line) {
  return absl::StartsWith(line, "vendid=") || absl::StartsWith(line, "devid=") ||
         absl::StartsWith(line, "sysimgguid=") || absl::StartsWith(line, "switchguid=") ||
         absl::StartsWith(line, "caguid=") || absl::StartsWith(line, "routerguid=");
}

bool IsPortsLine(absl::string_view line) {
  if (!(StartsWithWord(line, "CA") || StartsWithWord(line, "SW") || StartsWithWord(line, "RT"))) {
    return false;
  }
  absl::string_view rest = Trim(line.substr(2));
  return !rest.empty() && absl::ascii_isdigit(static_cast<unsigned char>(rest[0]));
}

absl::Status LineError(absl::StatusCode code, int line, absl::string_view what) {
  return absl::Status(code, absl::StrCat("topology line ", line, ": ", what));
}

}  // namespace

HostDevice SplitNodeDescription(absl::string_view description) {
  std::vector<absl::string_view> t =
      absl::StrSplit(Trim(description), absl::ByAnyChar(" \t"), absl::SkipEmpty());
  if (t.empty() || t.size() > 2) return {};  // rdma-ndd's "%h %d" has two words
  for (absl::string_view w : t) {
    if (w == "Mellanox" || w == "Technologies" || absl::StartsWith(w, "ConnectX") ||
        w == "InfiniHost" || w == "Voltaire" || w == "QLogic" || w == "Intel") {
      return {};
    }
  }
  if (t[0] == "localhost" || absl::StartsWith(t[0], "localhost.")) return {};
  HostDevice hd;
  hd.host = std::string(t[0]);
  if (t.size() == 2) hd.device = std::string(t[1]);
  return hd;
}

// Collects nodes and links while parsing, then builds the attachments.
class TopologyBuilder {
 public:
  struct Node {
    char type = '?';  // 'S' switch, 'C' CA, 'R' router
    std::string guid;
    std::string description;
    int ports = 0;  // from the record's header; 0: unknown
  };
  struct Link {
    std::string from;
    int from_port = 0;
    std::string to;
    int to_port = 0;
    std::string to_description;  // from the line's comment
  };

  void AddNode(const std::string& id, char type, std::string guid, std::string description,
               int ports = 0) {
    Node& n = nodes_[id];
    n.type = type;
    if (ports > 0) n.ports = ports;
    if (!guid.empty()) n.guid = std::move(guid);
    if (!description.empty()) n.description = std::move(description);
  }
  void AddLink(Link l) { links_.push_back(std::move(l)); }

  char TypeOf(const std::string& id) const {
    auto it = nodes_.find(id);
    if (it != nodes_.end()) return it->second.type;
    if (id.size() > 2 && id[1] == '-') {
      if (id[0] == 'S') return 'S';
      if (id[0] == 'H') return 'C';
      if (id[0] == 'R') return 'R';
    }
    return '?';
  }

  Topology Build(Topology::Format format, std::vector<std::string> warnings) const {
    Topology t;
    t.format_ = format;
    t.warnings_ = std::move(warnings);
    std::map<std::pair<std::string, int>, HcaAttachment> by_ca_port;
    auto describe = [&](const std::string& id, const std::string& fallback) {
      auto it = nodes_.find(id);
      if (it != nodes_.end() && !it->second.description.empty()) return it->second.description;
      return fallback;
    };
    auto guid_of = [&](const std::string& id) {
      auto it = nodes_.find(id);
      if (it != nodes_.end() && !it->second.guid.empty()) return it->second.guid;
      std::string g = GuidOfId(id);
      return g.empty() ? id : g;
    };
    for (const auto& [id, n] : nodes_) {
      if (n.type == 'S') t.switches_[guid_of(id)] = n.description.empty() ? id : n.description;
      if (n.type == 'S' && n.ports > 0) t.switch_ports_[guid_of(id)] = n.ports;
      if (n.type == 'C') ++t.cas_;
    }
    std::set<SwitchLink> switch_links;  // each cable is listed from both of its switches
    for (const Link& l : links_) {
      const char a = TypeOf(l.from), b = TypeOf(l.to);
      std::string ca, sw, ca_desc, sw_desc;
      int ca_port = 0, sw_port = 0;
      if (a == 'S' && b == 'S') {
        SwitchLink s{guid_of(l.from), l.from_port, guid_of(l.to), l.to_port};
        if (std::tie(s.b_id, s.b_port) < std::tie(s.a_id, s.a_port)) {
          s = {s.b_id, s.b_port, s.a_id, s.a_port};
        }
        for (const auto& [id, fallback] : {std::pair{l.from, std::string()},
                                           std::pair{l.to, l.to_description}}) {
          std::string name = describe(id, fallback);
          t.switches_.try_emplace(guid_of(id), name.empty() ? guid_of(id) : name);
        }
        switch_links.insert(std::move(s));
        continue;
      }
      if (a == 'C' && b == 'S') {
        ca = l.from, ca_port = l.from_port, sw = l.to, sw_port = l.to_port;
        ca_desc = describe(l.from, "");
        sw_desc = describe(l.to, l.to_description);
      } else if (a == 'S' && b == 'C') {
        ca = l.to, ca_port = l.to_port, sw = l.from, sw_port = l.from_port;
        ca_desc = describe(l.to, l.to_description);
        sw_desc = describe(l.from, "");
      } else {
        continue;
      }
      HcaAttachment& h = by_ca_port[{ca, ca_port}];
      h.ca_port = ca_port;
      h.ca_guid = GuidOfId(ca).empty() ? guid_of(ca) : GuidOfId(ca);
      if (h.description.empty()) h.description = ca_desc;
      h.leaf.id = guid_of(sw);
      if (h.leaf.name.empty() || h.leaf.name == h.leaf.id) {
        h.leaf.name = sw_desc.empty() ? h.leaf.id : sw_desc;
      }
      h.leaf.port = sw_port;
      if (!t.switches_.count(h.leaf.id)) t.switches_[h.leaf.id] = h.leaf.name;
    }
    std::set<std::string> unnamed;
    for (auto& [key, h] : by_ca_port) {
      std::string desc = h.description;
      if (desc.empty() && GuidOfId(key.first).empty()) desc = key.first;  // ibsim: the id names it
      HostDevice hd = SplitNodeDescription(desc);
      h.host = hd.host;
      h.device = hd.device;
      if (h.host.empty()) unnamed.insert(key.first);
      t.attachments_.push_back(std::move(h));
    }
    // CAs with no link to a switch and no host are counted too.
    for (const auto& [id, n] : nodes_) {
      if (n.type != 'C') continue;
      std::string desc = n.description.empty() && GuidOfId(id).empty() ? id : n.description;
      if (SplitNodeDescription(desc).host.empty()) unnamed.insert(id);
    }
    t.switch_links_.assign(switch_links.begin(), switch_links.end());
    t.unnamed_cas_ = unnamed.size();
    if (t.cas_ < unnamed.size()) t.cas_ = unnamed.size();
    t.Index();
    return t;
  }

  size_t nodes() const { return nodes_.size(); }

 private:
  std::map<std::string, Node> nodes_;
  std::vector<Link> links_;
};

namespace {

// ibnetdiscover default (and -f) output, and ibsim net files.
absl::StatusOr<Topology> ParseRecords(absl::string_view text) {
  TopologyBuilder b;
  std::vector<std::string> warnings;
  struct Current {
    bool attrs = false;
    int attrs_line = 0;
    bool header = false;
    int header_line = 0;
    std::string header_text;
    std::string id;
    char type = '?';
    std::string guid;  // from switchguid= / caguid=
    int ports = 0;
  } cur;
  auto finish = [&](int line) -> absl::Status {
    if (cur.header && cur.ports == 0) {
      return LineError(absl::StatusCode::kDataLoss, cur.header_line,
                       absl::StrCat("`", cur.header_text,
                                    "` has no port lines: the ibnetdiscover output is truncated"));
    }
    if (cur.attrs && !cur.header) {
      return LineError(absl::StatusCode::kDataLoss, cur.attrs_line,
                       "a node record ends before its node line: the output is truncated");
    }
    cur = Current{};
    return absl::OkStatus();
  };
  int n = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++n;
    absl::string_view line = Trim(raw);
    if (line.empty()) {
      if (absl::Status s = finish(n); !s.ok()) return s;
      continue;
    }
    if (line[0] == '#') continue;
    if (IsAttribute(line)) {
      if (cur.header) {  // a new record without a blank line before it
        if (absl::Status s = finish(n); !s.ok()) return s;
      }
      if (!cur.attrs) cur.attrs_line = n;
      cur.attrs = true;
      if (absl::StartsWith(line, "switchguid=") || absl::StartsWith(line, "caguid=") ||
          absl::StartsWith(line, "routerguid=")) {
        absl::string_view v = line.substr(line.find('=') + 1);
        v = v.substr(0, v.find('('));
        cur.guid = NormalizeGuid(v);
      }
      continue;
    }
    if (IsNodeHeader(line)) {
      if (cur.header) {
        if (absl::Status s = finish(n); !s.ok()) return s;
      }
      Cursor c(line);
      absl::string_view kind = c.Token();
      c.SkipSpace();
      int nports = 0;
      absl::string_view id;
      if (!c.Int(nports) || (c.SkipSpace(), !c.Eat('"')) || !c.Until('"', id)) {
        return LineError(absl::StatusCode::kDataLoss, n,
                         absl::StrCat("cannot parse node line `", line, "`"));
      }
      std::string desc;
      absl::string_view rest = c.Rest();
      if (size_t h = rest.find('#'); h != absl::string_view::npos) {
        if (auto q = FirstQuoted(rest.substr(h))) desc = std::string(Trim(*q));
      }
      cur.header = true;
      cur.header_line = n;
      cur.header_text = std::string(line);
      cur.id = std::string(id);
      cur.type = kind == "Switch" ? 'S' : kind == "Rt" ? 'R' : 'C';
      std::string guid = cur.guid.empty() ? GuidOfId(cur.id) : cur.guid;
      b.AddNode(cur.id, cur.type, guid, desc, nports);
      continue;
    }
    if (line[0] == '[') {
      if (!cur.header) {
        return LineError(absl::StatusCode::kDataLoss, n,
                         "a port line outside any node record: the output is truncated");
      }
      Cursor c(line);
      int lp = 0, rp = 0;
      absl::string_view ignored, remote;
      bool ok = c.Eat('[') && c.Int(lp) && c.Eat(']');
      if (ok && c.Eat('(')) ok = c.Until(')', ignored);
      if (ok) {
        c.SkipSpace();
        ok = c.Eat('"') && c.Until('"', remote) && c.Eat('[') && c.Int(rp) && c.Eat(']');
      }
      if (ok && c.Eat('(')) ok = c.Until(')', ignored);
      if (!ok) {
        return LineError(absl::StatusCode::kDataLoss, n,
                         absl::StrCat("cannot parse port line `", line, "`"));
      }
      std::string remote_desc;
      absl::string_view rest = c.Rest();
      if (size_t h = rest.find('#'); h != absl::string_view::npos) {
        absl::string_view comment = rest.substr(h + 1);
        // CA lines carry their own "lid N lmc N" first; the remote's description is the quoted
        // text either way.
        if (auto q = FirstQuoted(comment)) remote_desc = std::string(Trim(*q));
      }
      b.AddLink({cur.id, lp, std::string(remote), rp, remote_desc});
      ++cur.ports;
      continue;
    }
    if (cur.header || cur.attrs) {
      return LineError(absl::StatusCode::kDataLoss, n,
                       absl::StrCat("unexpected line in a node record: `", line, "`"));
    }
    warnings.push_back(absl::StrCat("line ", n, ": skipped `", line, "`"));
  }
  if (absl::Status s = finish(n); !s.ok()) return s;
  if (b.nodes() == 0) {
    return absl::InvalidArgumentError("topology: no node records in the ibnetdiscover output");
  }
  return b.Build(Topology::Format::kIbnetdiscover, std::move(warnings));
}

// `ibnetdiscover -p` (--ports): one line per port.
absl::StatusOr<Topology> ParsePorts(absl::string_view text) {
  TopologyBuilder b;
  std::vector<std::string> warnings;
  int n = 0;
  int parsed = 0;
  auto type_of = [](absl::string_view t) { return t == "SW" ? 'S' : t == "RT" ? 'R' : 'C'; };
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++n;
    absl::string_view line = Trim(raw);
    if (line.empty() || line[0] == '#') continue;
    if (!IsPortsLine(line)) {
      warnings.push_back(absl::StrCat("line ", n, ": skipped `", line, "`"));
      continue;
    }
    Cursor c(line);
    absl::string_view t1 = c.Token();
    int lid1 = 0, port1 = 0;
    c.SkipSpace();
    bool ok = c.Int(lid1);
    c.SkipSpace();
    ok = ok && c.Int(port1);
    absl::string_view guid1 = c.Token();
    absl::string_view width = c.Token();
    absl::string_view speed = c.Token();
    ok = ok && !NormalizeGuid(guid1).empty() && !width.empty() && !speed.empty();
    if (!ok) {
      return LineError(absl::StatusCode::kDataLoss, n,
                       absl::StrCat("cannot parse ports line `", line, "`: truncated?"));
    }
    ++parsed;
    const std::string id1 = NormalizeGuid(guid1);
    absl::string_view rest = Trim(c.Rest());
    if (!absl::StartsWith(rest, "- ")) {
      // Not connected: the rest is the node's own description, quoted or not.
      std::string desc(rest);
      if (desc.size() >= 2 && desc.front() == '\'' && desc.back() == '\'') {
        desc = desc.substr(1, desc.size() - 2);
      }
      b.AddNode(id1, type_of(t1), id1, std::string(Trim(desc)));
      continue;
    }
    Cursor r(rest.substr(2));
    absl::string_view t2 = r.Token();
    int lid2 = 0, port2 = 0;
    r.SkipSpace();
    ok = r.Int(lid2);
    r.SkipSpace();
    ok = ok && r.Int(port2);
    absl::string_view guid2 = r.Token();
    absl::string_view names = Trim(r.Rest());
    const size_t sep = names.find("' - '");
    ok = ok && !NormalizeGuid(guid2).empty() && absl::StartsWith(names, "(") &&
         absl::EndsWith(names, ")") && sep != absl::string_view::npos;
    if (!ok) {
      return LineError(absl::StatusCode::kDataLoss, n,
                       absl::StrCat("cannot parse ports line `", line, "`: truncated?"));
    }
    auto unquote = [](absl::string_view d) {
      d = Trim(d);
      if (absl::StartsWith(d, "'")) d.remove_prefix(1);
      if (absl::EndsWith(d, "'")) d.remove_suffix(1);
      return Trim(d);
    };
    absl::string_view d1 = unquote(names.substr(1, sep));
    absl::string_view d2 = unquote(names.substr(sep + 4, names.size() - sep - 5));
    const std::string id2 = NormalizeGuid(guid2);
    b.AddNode(id1, type_of(t1), id1, std::string(Trim(d1)));
    b.AddNode(id2, type_of(t2), id2, std::string(Trim(d2)));
    b.AddLink({id1, port1, id2, port2, std::string(Trim(d2))});
  }
  if (parsed == 0) {
    return absl::InvalidArgumentError("topology: no port lines in the ibnetdiscover -p output");
  }
  return b.Build(Topology::Format::kIbnetdiscoverPorts, std::move(warnings));
}

}  // namespace

absl::StatusOr<Topology> Topology::Parse(absl::string_view text, Format format) {
  if (format == Format::kAuto) {
    bool any = false;
    format = Format::kNodeSwitchMap;
    for (absl::string_view raw : absl::StrSplit(text, '\n')) {
      absl::string_view line = Trim(raw);
      if (line.empty() || line[0] == '#') continue;
      any = true;
      if (IsAttribute(line) || IsNodeHeader(line) || line[0] == '[') {
        format = Format::kIbnetdiscover;
        break;
      }
      if (IsPortsLine(line)) {
        format = Format::kIbnetdiscoverPorts;
        break;
      }
    }
    if (!any) return absl::InvalidArgumentError("topology: empty");
  }
  if (format == Format::kIbnetdiscover) return ParseRecords(text);
  if (format == Format::kIbnetdiscoverPorts) return ParsePorts(text);

  // node → switch map.
  Topology t;
  t.format_ = Format::kNodeSwitchMap;
  int n = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++n;
    absl::string_view line = raw.substr(0, raw.find('#'));
    std::vector<absl::string_view> cols =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (cols.empty()) continue;
    if (cols.size() != 2) {
      return LineError(absl::StatusCode::kInvalidArgument, n,
                       absl::StrCat("expected `node switch`, got `", Trim(line), "`"));
    }
    HcaAttachment h;
    h.host = std::string(cols[0]);
    h.description = h.host;
    h.leaf.id = std::string(cols[1]);
    h.leaf.name = h.leaf.id;
    h.any_device = true;
    t.switches_[h.leaf.id] = h.leaf.name;
    t.attachments_.push_back(std::move(h));
  }
  if (t.attachments_.empty()) return absl::InvalidArgumentError("topology: empty");
  t.Index();
  return t;
}

Topology Topology::FromAttachments(Format format, std::vector<HcaAttachment> attachments,
                                   std::map<std::string, std::string> switches,
                                   std::vector<SwitchLink> switch_links,
                                   std::map<std::string, int> switch_ports) {
  Topology t;
  t.format_ = format;
  t.switches_ = std::move(switches);
  t.switch_ports_ = std::move(switch_ports);
  for (SwitchLink& s : switch_links) {
    if (std::tie(s.b_id, s.b_port) < std::tie(s.a_id, s.a_port)) {
      s = {s.b_id, s.b_port, s.a_id, s.a_port};
    }
    t.switches_.try_emplace(s.a_id, s.a_id);
    t.switches_.try_emplace(s.b_id, s.b_id);
  }
  std::sort(switch_links.begin(), switch_links.end());
  switch_links.erase(std::unique(switch_links.begin(), switch_links.end()), switch_links.end());
  t.switch_links_ = std::move(switch_links);
  std::set<std::string> cas;  // GUID (else description) of each CA
  for (const HcaAttachment& h : attachments) {
    if (!h.leaf.id.empty() && !t.switches_.count(h.leaf.id)) {
      t.switches_[h.leaf.id] = h.leaf.name.empty() ? h.leaf.id : h.leaf.name;
    }
    if (format != Format::kNodeSwitchMap) {
      cas.insert(h.ca_guid.empty() ? h.description : h.ca_guid);
      if (h.host.empty()) ++t.unnamed_cas_;
    }
  }
  t.cas_ = cas.size();
  t.attachments_ = std::move(attachments);
  t.Index();
  return t;
}

void Topology::Index() {
  by_host_.clear();
  by_short_.clear();
  leaf_hosts_.clear();
  hosts_.clear();
  for (size_t i = 0; i < attachments_.size(); ++i) {
    const HcaAttachment& h = attachments_[i];
    if (h.host.empty()) continue;
    hosts_.insert(h.host);
    by_host_[h.host].push_back(i);
    by_short_[h.host.substr(0, h.host.find('.'))].push_back(i);
    leaf_hosts_[h.leaf.id].insert(h.host);
  }
}

const std::vector<size_t>* Topology::Find(absl::string_view host) const {
  if (auto it = by_host_.find(host); it != by_host_.end()) return &it->second;
  absl::string_view s = host.substr(0, host.find('.'));
  if (auto it = by_short_.find(s); it != by_short_.end()) return &it->second;
  return nullptr;
}

std::vector<const HcaAttachment*> Topology::HcasOf(absl::string_view host) const {
  std::vector<const HcaAttachment*> out;
  if (const std::vector<size_t>* v = Find(host)) {
    for (size_t i : *v) out.push_back(&attachments_[i]);
  }
  return out;
}

std::string Topology::LeafOf(absl::string_view host, absl::string_view device,
                             absl::string_view port) const {
  const std::vector<size_t>* v = Find(host);
  if (v == nullptr || v->empty()) return "";
  if (!device.empty()) {
    int p = 0;
    const bool want_port = !port.empty() && absl::SimpleAtoi(port, &p);
    for (size_t i : *v) {
      const HcaAttachment& h = attachments_[i];
      if (h.device != device) continue;
      if (want_port && h.ca_port != 0 && h.ca_port != p) continue;
      return h.leaf.id;
    }
  }
  for (size_t i : *v) {
    if (attachments_[i].any_device) return attachments_[i].leaf.id;  // a host-level entry
  }
  return "";
}

std::vector<std::string> Topology::LeavesOf(absl::string_view host) const {
  std::set<std::string> s;
  if (const std::vector<size_t>* v = Find(host)) {
    for (size_t i : *v) s.insert(attachments_[i].leaf.id);
  }
  return {s.begin(), s.end()};
}

std::vector<std::string> Topology::HostsOn(absl::string_view leaf) const {
  auto it = leaf_hosts_.find(std::string(leaf));
  if (it == leaf_hosts_.end()) return {};
  return {it->second.begin(), it->second.end()};
}

std::string Topology::LeafName(absl::string_view leaf) const {
  auto it = switches_.find(std::string(leaf));
  return it == switches_.end() ? "" : it->second;
}

}  // namespace ringside::analysis
