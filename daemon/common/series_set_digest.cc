#include "daemon/common/series_set_digest.h"

#include <openssl/evp.h>

#include <cstring>

namespace ringside::daemon {

struct SeriesSetDigest::State {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  // Fields gathered and hashed a few KB at a time (SHA256_Update has a fixed cost a call).
  unsigned char buf[4096];
  size_t used = 0;

  ~State() { EVP_MD_CTX_free(ctx); }
  void Init() { EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr); }
  void Flush() {
    EVP_DigestUpdate(ctx, buf, used);
    used = 0;
  }
  void Put(const void* p, size_t n) {
    if (used + n > sizeof(buf)) Flush();
    if (n > sizeof(buf)) {
      EVP_DigestUpdate(ctx, p, n);
      return;
    }
    std::memcpy(buf + used, p, n);
    used += n;
  }
  void PutU32(uint32_t v) {
    const unsigned char b[4] = {static_cast<unsigned char>(v), static_cast<unsigned char>(v >> 8),
                                static_cast<unsigned char>(v >> 16),
                                static_cast<unsigned char>(v >> 24)};
    Put(b, 4);
  }
  void PutString(absl::string_view s) {
    PutU32(static_cast<uint32_t>(s.size()));
    Put(s.data(), s.size());
  }
};

SeriesSetDigest::SeriesSetDigest() : state_(std::make_unique<State>()) { state_->Init(); }

SeriesSetDigest::~SeriesSetDigest() = default;

void SeriesSetDigest::Add(const DigestFields& d) {
  State& s = *state_;
  s.PutU32(d.id);
  s.PutString(d.source);
  s.PutString(d.device);
  s.PutString(d.port);
  s.PutString(d.counter);
  s.PutString(d.unit);
  s.PutU32(static_cast<uint32_t>(d.priority));
  s.PutU32(d.kind);
  s.PutU32(d.width);
  const unsigned char flags[2] = {static_cast<unsigned char>(d.saturates ? 1 : 0),
                                  static_cast<unsigned char>(d.term_width == 32 ? 32 : 0)};
  s.Put(flags, sizeof(flags));
}

void SeriesSetDigest::Add(const v1::SeriesDef& def) {
  DigestFields d;
  d.id = def.id();
  d.source = def.source();
  d.device = def.device();
  d.port = def.port();
  d.counter = def.counter();
  d.unit = def.unit();
  d.priority = def.priority();
  d.kind = static_cast<uint32_t>(def.kind());
  d.width = def.width();
  d.saturates = def.saturates();
  d.term_width = def.term_width();
  Add(d);
}

std::string SeriesSetDigest::Finish() {
  State& s = *state_;
  s.Flush();
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(s.ctx, out, &len);
  s.Init();
  return std::string(reinterpret_cast<const char*>(out), len);
}

}  // namespace ringside::daemon
