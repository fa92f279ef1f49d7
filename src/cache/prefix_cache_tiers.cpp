// PrefixCache's lower tiers (prefix_cache.h): write-through, fetch, reject, parked sessions.
#include <algorithm>
#include <cstring>

#include "cache/entry_codec.h"
#include "cache/image_buffer.h"
#include "cache/le_bytes.h"
#include "cache/prefix_cache.h"

namespace geist_cache {

namespace {
constexpr size_t kMaxSpills = 64;  // write-through entries waiting to be encoded, at most
constexpr size_t kMaxRecordGenerations = 1 << 16;  // names whose last generation is kept

// A record's body (the entry's image bytes): "GEISTRG1", the generation (u64 LE), then the
// caller's payload. A body without the magic is a record written before generations: its
// generation is 0 and all of it is the payload.
constexpr char kRecordMagic[8] = {'G', 'E', 'I', 'S', 'T', 'R', 'G', '1'};
constexpr size_t kRecordHeader = 16;

std::vector<uint8_t> record_body(uint64_t generation, const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> b(kRecordHeader + payload.size());
  std::memcpy(b.data(), kRecordMagic, 8);
  put_u64(b.data() + 8, generation);
  if (!payload.empty()) std::memcpy(b.data() + kRecordHeader, payload.data(), payload.size());
  return b;
}

// The generation of a body and where its payload starts.
uint64_t record_generation(const uint8_t* body, size_t n, size_t* payload_off) {
  if (n >= kRecordHeader && std::memcmp(body, kRecordMagic, 8) == 0) {
    *payload_off = kRecordHeader;
    return get_u64(body + 8);
  }
  *payload_off = 0;
  return 0;
}

uint64_t wall_clock_us() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}
}  // namespace

void PrefixCache::enqueue_spill(Spill s) {
  {
    std::lock_guard<std::mutex> lock(q_mu_);
    if (spills_.size() >= kMaxSpills || stop_) {
      std::lock_guard<std::mutex> l2(mu_);
      ++st_.spill_dropped;
      return;
    }
    spills_.push_back(std::move(s));
  }
  spill_cv_.notify_all();
}

void PrefixCache::spill_worker() {
  std::unique_lock<std::mutex> lock(q_mu_);
  for (;;) {
    spill_cv_.wait(lock, [&] { return stop_ || !spills_.empty(); });
    if (spills_.empty()) return;  // stopping, nothing left
    Spill s = std::move(spills_.front());
    spills_.pop_front();
    spilling_ = true;
    lock.unlock();
    const std::string key =
        s.record ? entry_key(s.ns, nullptr, 0) : entry_key(s.ns, s.tokens.data(), s.tokens.size());
    // Encoding copies the image: here, off the request path.
    auto obj = std::make_shared<const std::vector<uint8_t>>(
        encode_entry(s.ns, s.tokens.data(), s.tokens.size(), s.image->data(), s.image->size()));
    for (size_t t = 0; t < tiers_.size() && t < 32; ++t) {
      if (((s.to >> t) & 1u) == 0) continue;
      if (s.record) tiers_[t]->erase(key);  // tiers keep the first object of a key
      tiers_[t]->put(key, obj);
    }
    lock.lock();
    spilling_ = false;
    if (spills_.empty()) idle_cv_.notify_all();
  }
}

void PrefixCache::flush_to_tiers() {
  std::unique_lock<std::mutex> lock(q_mu_);
  idle_cv_.wait(lock, [&] { return spills_.empty() && !spilling_; });
}

std::shared_ptr<PrefixCache::Fetch> PrefixCache::fetch(const std::string& ns,
                                                       std::vector<geist_token> tokens,
                                                       int32_t grid, int32_t deeper_than,
                                                       Deadline deadline) {
  auto out = std::make_shared<Fetch>();
  if (tiers_.empty()) {
    out->done = true;
    return out;
  }
  {
    std::lock_guard<std::mutex> lock(q_mu_);
    fetches_.push_back(FetchJob{ns, std::move(tokens), grid, deeper_than, deadline, out});
  }
  fetch_cv_.notify_all();
  return out;
}

void PrefixCache::fetch_worker() {
  std::unique_lock<std::mutex> lock(q_mu_);
  for (;;) {
    fetch_cv_.wait(lock, [&] { return stop_ || !fetches_.empty(); });
    if (stop_) {  // nobody waits for these any more than for the scheduler
      for (FetchJob& j : fetches_) j.out->done = true;
      fetches_.clear();
      return;
    }
    FetchJob job = std::move(fetches_.front());
    fetches_.pop_front();
    lock.unlock();
    job.out->hit = fetch_now(job);
    job.out->done = true;
    lock.lock();
  }
}

Image PrefixCache::read_tier(size_t t, const std::string& key, const std::string& ns,
                             const geist_token* tokens, size_t n, Deadline deadline) {
  Image obj = tiers_[t]->get(key, deadline);
  if (!obj) return nullptr;
  EntryView v;
  std::string why;
  if (!decode_entry(obj->data(), obj->size(), &v, &why) || !entry_matches(v, ns, tokens, n)) {
    // Passed the tier's own checks but is not what this key stands for (a foreign namespace,
    // a hash collision, a bug elsewhere): never served.
    tiers_[t]->erase(key);
    ++rejected_[t];
    return nullptr;
  }
  std::vector<uint8_t> image;
  fresh_buffer(&image, v.image_size);
  if (v.image_size > 0) std::memcpy(image.data(), v.image, v.image_size);
  return std::make_shared<const std::vector<uint8_t>>(std::move(image));
}

PrefixCache::Hit PrefixCache::fetch_now(const FetchJob& job) {
  const size_t n = job.tokens.size();
  std::vector<size_t> lens;  // usable lengths deeper than asked, deepest first
  if (static_cast<int64_t>(n) > job.deeper_than) lens.push_back(n);
  for (size_t k = (n / job.grid) * job.grid; k > static_cast<size_t>(job.deeper_than) && k > 0;
       k -= job.grid) {
    if (k != n) lens.push_back(k);
  }
  if (lens.empty()) return Hit{};
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++st_.tier_lookups;
  }
  std::vector<std::string> keys;
  for (size_t len : lens) keys.push_back(entry_key(job.ns, job.tokens.data(), len));
  // One batch per tier; then the deepest length any tier claims, the upper tier first.
  std::vector<std::vector<bool>> has(tiers_.size());
  for (size_t t = 0; t < tiers_.size(); ++t) {
    has[t] = tiers_[t]->contains(keys, job.deadline);
    has[t].resize(keys.size(), false);
  }
  for (size_t i = 0; i < lens.size(); ++i) {
    for (size_t t = 0; t < tiers_.size(); ++t) {
      if (!has[t][i]) continue;
      if (std::chrono::steady_clock::now() >= job.deadline) return Hit{};
      Image img = read_tier(t, keys[i], job.ns, job.tokens.data(), lens[i], job.deadline);
      if (!img) continue;
      Image held;
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++st_.tier_hits;
        st_.tier_hit_tokens += static_cast<int64_t>(lens[i]);
        held = insert_locked(job.ns, job.tokens.data(), lens[i], img);
      }
      if (t > 0) {  // the tiers above the one it came from get a copy
        enqueue_spill(Spill{
            job.ns, std::vector<geist_token>(job.tokens.begin(), job.tokens.begin() + lens[i]),
            held, (1u << t) - 1});
      }
      return Hit{static_cast<int32_t>(lens[i]), held};
    }
  }
  return Hit{};
}

void PrefixCache::reject(const std::string& ns, const geist_token* tokens, size_t n) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++st_.restore_rejected;
    const Entry* en = find_locked(ns, tokens, n);
    auto [b, e] = map_.equal_range(key_of(ns, tokens, n));
    for (auto it = b; it != e; ++it) {
      if (&it->second == en) {
        st_.bytes -= static_cast<int64_t>(it->second.image->size());
        map_.erase(it);
        break;
      }
    }
  }
  if (tiers_.empty()) return;
  const std::string key = entry_key(ns, tokens, n);
  for (auto& t : tiers_) t->erase(key);
}

void PrefixCache::store_in_tiers(const std::string& ns, const std::vector<geist_token>& tokens,
                                 Image image) {
  if (!tiers_.empty()) enqueue_spill(Spill{ns, tokens, std::move(image), all_tiers()});
}

bool PrefixCache::in_tiers(const std::string& ns, const std::vector<geist_token>& tokens) {
  const std::vector<std::string> keys = {entry_key(ns, tokens.data(), tokens.size())};
  const Deadline d = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (auto& t : tiers_) {
    const std::vector<bool> h = t->contains(keys, d);
    if (!h.empty() && h[0]) return true;
  }
  return false;
}

Image PrefixCache::load_from_tiers(const std::string& ns, const std::vector<geist_token>& tokens,
                                   Deadline deadline) {
  if (tokens.empty()) return nullptr;
  const std::string key = entry_key(ns, tokens.data(), tokens.size());
  for (size_t t = 0; t < tiers_.size(); ++t) {
    if (Image img = read_tier(t, key, ns, tokens.data(), tokens.size(), deadline)) return img;
  }
  return nullptr;
}

void PrefixCache::put_record(const std::string& name, const std::vector<geist_token>& tokens,
                             std::vector<uint8_t> payload) {
  if (tiers_.empty() || tokens.empty()) return;
  uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (record_gen_.size() >= kMaxRecordGenerations) record_gen_.clear();
    uint64_t& seen = record_gen_[name];
    generation = std::max(wall_clock_us(), seen + 1);
    seen = generation;
  }
  Spill sp{name, tokens,
           std::make_shared<const std::vector<uint8_t>>(record_body(generation, payload)),
           all_tiers()};
  sp.record = true;
  enqueue_spill(std::move(sp));
}

bool PrefixCache::get_record(const std::string& name, Deadline deadline,
                             std::vector<geist_token>* tokens, std::vector<uint8_t>* payload) {
  const std::string key = entry_key(name, nullptr, 0);
  // Every tier's copy: a replica's own disk may hold an older one than the shared tier below.
  struct Copy {
    Image obj;  // holds the bytes `view` points into
    EntryView view;
    uint64_t generation = 0;
    size_t payload_off = 0;
  };
  std::vector<Copy> copies(tiers_.size());
  int best = -1;
  for (size_t t = 0; t < tiers_.size(); ++t) {
    Image obj = tiers_[t]->get(key, deadline);
    if (!obj) continue;
    EntryView v;
    std::string why;
    if (!decode_entry(obj->data(), obj->size(), &v, &why) || v.ns != name) {
      tiers_[t]->erase(key);
      ++rejected_[t];
      continue;
    }
    copies[t].obj = obj;
    copies[t].view = v;
    copies[t].generation = record_generation(v.image, v.image_size, &copies[t].payload_off);
    if (best < 0 || copies[t].generation > copies[static_cast<size_t>(best)].generation) {
      best = static_cast<int>(t);
    }
  }
  if (best < 0) return false;
  const Copy& win = copies[static_cast<size_t>(best)];
  const EntryView& v = win.view;
  tokens->resize(v.n_tokens);
  for (size_t i = 0; i < v.n_tokens; ++i) (*tokens)[i] = v.token(i);
  payload->assign(v.image + win.payload_off, v.image + v.image_size);
  uint32_t stale = 0;  // tiers holding an older copy: given the newest
  for (size_t t = 0; t < copies.size() && t < 32; ++t) {
    if (copies[t].obj && copies[t].generation < win.generation) stale |= 1u << t;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Bounded: forgetting a name loses only the "+1 after a read" (the clock still orders).
    if (record_gen_.size() >= kMaxRecordGenerations) record_gen_.clear();
    uint64_t& seen = record_gen_[name];
    seen = std::max(seen, win.generation);
  }
  if (stale != 0) {
    Spill sp{name, *tokens,
             std::make_shared<const std::vector<uint8_t>>(v.image, v.image + v.image_size), stale};
    sp.record = true;
    enqueue_spill(std::move(sp));
  }
  return true;
}

void PrefixCache::erase_record(const std::string& name) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    record_gen_.erase(name);  // a later write still outranks every copy: the clock went on
  }
  const std::string key = entry_key(name, nullptr, 0);
  for (auto& t : tiers_) t->erase(key);
}

std::vector<TierReport> PrefixCache::tier_stats() const {
  std::vector<TierReport> out;
  for (size_t t = 0; t < tiers_.size(); ++t) {
    out.push_back(TierReport{tiers_[t]->name(), tiers_[t]->stats(), rejected_[t].load()});
  }
  return out;
}

}  // namespace geist_cache
