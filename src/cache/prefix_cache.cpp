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
    : budget_(budget_bytes),
      tiers_(std::move(tiers)),
      rejected_(tiers_.size()),
      image_buffers_(BufferPool::create(2, size_t{1} << 30)) {
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

uint64_t PrefixCache::key_begin(const std::string& ns) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : ns) h = mix(h, static_cast<unsigned char>(c));
  return mix(h, 0xffffffffull + ns.size());
}

uint64_t PrefixCache::key_add(uint64_t h, geist_token t) {
  return mix(h, static_cast<uint32_t>(t));
}

uint64_t PrefixCache::key_end(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

uint64_t PrefixCache::key_of(const std::string& ns, const geist_token* tokens, size_t n) {
  uint64_t h = key_begin(ns);
  for (size_t i = 0; i < n; ++i) h = key_add(h, tokens[i]);
  return key_end(h);
}

const PrefixCache::Entry* PrefixCache::find_locked(const std::string& ns, const geist_token* tokens,
                                                   size_t n) const {
  return find_locked(key_of(ns, tokens, n), ns, tokens, n);
}

void PrefixCache::erase_locked(std::unordered_multimap<uint64_t, Entry>::iterator it) {
  st_.bytes -= static_cast<int64_t>(it->second.image->size());
  auto l = lens_.find(it->second.tokens.size());
  if (l != lens_.end() && --l->second == 0) lens_.erase(l);
  map_.erase(it);  // a request restoring from it holds its own reference to the image
}

const PrefixCache::Entry* PrefixCache::find_locked(uint64_t key, const std::string& ns,
                                                   const geist_token* tokens, size_t n) const {
  auto [b, e] = map_.equal_range(key);
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
  const size_t g = static_cast<size_t>(std::max(grid, 1));
  // The usable lengths some entry has, ascending, and their keys in one pass over the tokens.
  std::vector<size_t> lens;
  std::vector<uint64_t> keys;
  uint64_t h = key_begin(ns);
  size_t at = 0;
  for (auto it = lens_.begin(); it != lens_.end() && it->first <= n; ++it) {
    const size_t len = it->first;
    if (len == 0 || (len != n && len % g != 0)) continue;
    for (; at < len; ++at) h = key_add(h, tokens[at]);
    lens.push_back(len);
    keys.push_back(key_end(h));
  }
  for (size_t i = lens.size(); i-- > 0;) {  // deepest first
    const size_t len = lens[i];
    const Entry* en = find_locked(keys[i], ns, tokens, len);
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
    ++st_.evictions;
    erase_locked(worst);
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
  ++lens_[n];
  ++st_.inserts;
  return img;
}

void PrefixCache::insert(const std::string& ns, const geist_token* tokens, size_t n,
                         std::vector<uint8_t> image) {
  Image img;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (find_locked(ns, tokens, n) == nullptr) {
      img = insert_locked(ns, tokens, n, image_buffers_->share(std::move(image)));
    }
  }
  if (!img) {  // held already: the buffer serves the next one (recycled outside the lock)
    image_buffers_->recycle(std::move(image));
    return;
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
