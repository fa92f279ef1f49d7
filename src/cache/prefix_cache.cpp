#include "cache/prefix_cache.h"

#include <algorithm>
#include <cstring>

#include "cache/entry_codec.h"

namespace geist_cache {

namespace {
uint64_t mix(uint64_t h, uint64_t v) {  // FNV-1a over 8-byte words, then a final avalanche
  h ^= v;
  h *= 0x100000001b3ull;
  return h;
}
}  // namespace

PrefixCache::PrefixCache(size_t budget_bytes, std::vector<std::unique_ptr<Tier>> tiers)
    : budget_(budget_bytes), tiers_(std::move(tiers)), rejected_(tiers_.size()) {
  if (!tiers_.empty()) {
    spill_thread_ = std::thread([this] { spill_worker(); });
    fetch_thread_ = std::thread([this] { fetch_worker(); });
  }
}

PrefixCache::~PrefixCache() {
  {
    std::lock_guard<std::mutex> lock(q_mu_);
    stop_ = true;
  }
  spill_cv_.notify_all();
  fetch_cv_.notify_all();
  if (spill_thread_.joinable()) spill_thread_.join();
  if (fetch_thread_.joinable()) fetch_thread_.join();
}

uint64_t PrefixCache::key_of(const std::string& ns, const geist_token* tokens, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : ns) h = mix(h, static_cast<unsigned char>(c));
  h = mix(h, 0xffffffffull + ns.size());
  for (size_t i = 0; i < n; ++i) h = mix(h, static_cast<uint32_t>(tokens[i]));
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

const PrefixCache::Entry* PrefixCache::find_locked(const std::string& ns, const geist_token* tokens,
                                                   size_t n) const {
  auto [b, e] = map_.equal_range(key_of(ns, tokens, n));
  for (auto it = b; it != e; ++it) {
    const Entry& en = it->second;
    if (en.ns == ns && en.tokens.size() == n &&
        std::memcmp(en.tokens.data(), tokens, n * sizeof(geist_token)) == 0) {
      return &en;
    }
  }
  return nullptr;
}

PrefixCache::Hit PrefixCache::lookup(const std::string& ns, const geist_token* tokens, size_t n,
                                     int32_t grid) {
  std::lock_guard<std::mutex> lock(mu_);
  ++st_.lookups;
  std::vector<size_t> lens;
  lens.push_back(n);
  for (size_t k = (n / grid) * grid; k > 0; k -= grid) {
    if (k != n) lens.push_back(k);
  }
  for (size_t len : lens) {
    const Entry* en = find_locked(ns, tokens, len);
    if (en == nullptr) continue;
    Entry* m = const_cast<Entry*>(en);
    ++m->hits;
    m->last_use = ++clock_;
    ++st_.hits;
    st_.hit_tokens += static_cast<int64_t>(len);
    return Hit{static_cast<int32_t>(len), m->image};
  }
  return Hit{};
}

bool PrefixCache::contains(const std::string& ns, const geist_token* tokens, size_t n) const {
  std::lock_guard<std::mutex> lock(mu_);
  return find_locked(ns, tokens, n) != nullptr;
}

void PrefixCache::evict_for_locked(size_t need) {
  while (!map_.empty() && static_cast<size_t>(st_.bytes) + need > budget_) {
    // Lowest value first: (hits + 1) x tokens saved per byte, halved for every 64 ticks of
    // the logical clock since its last use.
    auto worst = map_.end();
    double worst_v = 0;
    for (auto it = map_.begin(); it != map_.end(); ++it) {
      const Entry& en = it->second;
      const double age = static_cast<double>(clock_ - en.last_use);
      const double v = (static_cast<double>(en.hits) + 1.0) *
                       static_cast<double>(en.tokens.size()) /
                       static_cast<double>(en.image->size()) / (1.0 + age / 64.0);
      if (worst == map_.end() || v < worst_v) {
        worst = it;
        worst_v = v;
      }
    }
    st_.bytes -= static_cast<int64_t>(worst->second.image->size());
    ++st_.evictions;
    map_.erase(worst);  // a request restoring from it holds its own reference to the image
  }
}

Image PrefixCache::insert_locked(const std::string& ns, const geist_token* tokens, size_t n,
                                 Image img) {
  if (const Entry* en = find_locked(ns, tokens, n)) return en->image;
  if (img->size() > budget_) return img;
  evict_for_locked(img->size());
  Entry en;
  en.ns = ns;
  en.tokens.assign(tokens, tokens + n);
  st_.bytes += static_cast<int64_t>(img->size());
  en.image = img;
  en.last_use = ++clock_;
  map_.emplace(key_of(ns, tokens, n), std::move(en));
  ++st_.inserts;
  return img;
}

void PrefixCache::insert(const std::string& ns, const geist_token* tokens, size_t n,
                         std::vector<uint8_t> image) {
  Image img;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (find_locked(ns, tokens, n) != nullptr) return;
    img = insert_locked(ns, tokens, n,
                        std::make_shared<const std::vector<uint8_t>>(std::move(image)));
  }
  if (!tiers_.empty()) {
    enqueue_spill(Spill{ns, std::vector<geist_token>(tokens, tokens + n), img, all_tiers()});
  }
}

CacheStats PrefixCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  CacheStats s = st_;
  s.budget = static_cast<int64_t>(budget_);
  s.entries = static_cast<int64_t>(map_.size());
  return s;
}

}  // namespace geist_cache
