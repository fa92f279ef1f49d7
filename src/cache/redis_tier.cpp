#include "cache/redis_tier.h"

#include <hiredis/hiredis.h>
#include <xxhash.h>

#include "cache/image_buffer.h"
#include "cache/redis_object.h"

namespace geist_cache {
namespace ro = redis_object;
namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> object_keys(const RedisTierConfig& cfg, const std::string& key,
                                     const ro::Manifest& m) {
  std::vector<std::string> keys{ro::manifest_key(cfg.prefix, key)};
  for (uint32_t i = 0; i < m.parts.size(); ++i) {
    keys.push_back(ro::part_key(cfg.prefix, key, m.write_id, i));
  }
  return keys;
}

}  // namespace

RedisTier::RedisTier(RedisTierConfig cfg)
    : cfg_(std::move(cfg)), breaker_(cfg_.breaker), rng_(std::random_device{}()) {
  writer_ = std::thread([this] { writer_loop(); });
}

RedisTier::~RedisTier() {
  // What is queued still gets a bounded chance (a stopping server hands its last entries
  // down); with the circuit open it would only be dropped.
  if (breaker_.closed()) drain(cfg_.shutdown_flush);
  {
    std::lock_guard<std::mutex> lock(q_mu_);
    stop_ = true;
  }
  q_cv_.notify_all();
  writer_.join();
}

void RedisTier::log(const std::string& line) const {
  if (cfg_.log) cfg_.log(line);
}

void RedisTier::note_failure(const std::string& what, const std::string& err) {
  if (breaker_.failure(Clock::now())) {
    log("redis: circuit open after " + what + ": " + err);
  }
}

void RedisTier::note_success() {
  if (breaker_.success()) log("redis: circuit closed (" + describe(cfg_.endpoint) + " answers)");
}

std::unique_ptr<RedisConn> RedisTier::acquire(Deadline deadline, bool* reused) {
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (!pool_.empty()) {
      auto c = std::move(pool_.back());
      pool_.pop_back();
      *reused = true;
      return c;
    }
  }
  *reused = false;
  IoResult r;
  std::string err;
  auto c = RedisConn::open(cfg_.endpoint, deadline, &r, &err);
  if (!c) {
    if (r == IoResult::kTimeout) {
      std::lock_guard<std::mutex> lock(st_mu_);
      ++st_.timeouts;
    }
    note_failure("connect", err);
  }
  return c;
}

void RedisTier::release(std::unique_ptr<RedisConn> conn) {
  if (!conn || conn->broken()) return;
  std::lock_guard<std::mutex> lock(pool_mu_);
  if (pool_.size() < cfg_.pool_max) pool_.push_back(std::move(conn));
}

bool RedisTier::enqueue(Job job, bool bounded) {
  const size_t bytes = job.object ? job.object->size() : 0;
  {
    std::lock_guard<std::mutex> lock(q_mu_);
    if (bounded &&
        (queue_.size() >= cfg_.queue_items || queued_bytes_ + bytes > cfg_.queue_bytes)) {
      std::lock_guard<std::mutex> st(st_mu_);
      ++st_.dropped;
      return false;
    }
    // Small jobs (erase, touch, delete) are bounded by a generous count only: dropping a
    // delete would leave a bad object behind.
    if (!bounded && queue_.size() >= cfg_.queue_items * 4) return false;
    queued_bytes_ += bytes;
    queue_.push_back(std::move(job));
  }
  q_cv_.notify_one();
  return true;
}

bool RedisTier::put(const std::string& key, Image object) {
  if (!object || breaker_.blocked(Clock::now()) ||
      ro::part_count(object->size(), cfg_.part_bytes) > ro::kMaxParts ||
      object->size() > cfg_.max_object_bytes) {
    std::lock_guard<std::mutex> lock(st_mu_);
    ++st_.dropped;
    return false;
  }
  return enqueue(Job{Job::Kind::kPut, key, std::move(object), {}, {}}, true);
}

void RedisTier::erase(const std::string& key) {
  enqueue(Job{Job::Kind::kErase, key, nullptr, {}, {}}, false);
}

Image RedisTier::get(const std::string& key, Deadline deadline) {
  {
    std::lock_guard<std::mutex> lock(st_mu_);
    ++st_.gets;
  }
  if (!breaker_.allow(Clock::now())) return nullptr;
  // A pooled connection may have died with a Redis restart: one retry on a fresh one.
  for (int attempt = 0; attempt < 2; ++attempt) {
    bool reused = false;
    auto conn = acquire(deadline, &reused);
    if (!conn) return nullptr;
    bool io_failed = false;
    Image img = get_once(*conn, key, deadline, &io_failed);
    release(std::move(conn));
    if (!io_failed || !reused) return img;
    std::lock_guard<std::mutex> lock(pool_mu_);
    pool_.clear();  // the others were opened before the same restart
  }
  return nullptr;
}

Image RedisTier::get_once(RedisConn& conn, const std::string& key, Deadline deadline,
                          bool* io_failed) {
  std::string err;
  RedisReply mr;
  const std::string mkey = ro::manifest_key(cfg_.prefix, key);
  IoResult r = conn.command({"GET", mkey}, deadline, &mr, &err);
  if (r != IoResult::kOk) {
    // A Redis that does not answer a small GET by the deadline counts against the breaker.
    *io_failed = r == IoResult::kError;
    if (r == IoResult::kTimeout) {
      std::lock_guard<std::mutex> lock(st_mu_);
      ++st_.timeouts;
    }
    note_failure("GET manifest", err);
    return nullptr;
  }
  note_success();
  if (mr->type == REDIS_REPLY_NIL) return nullptr;
  auto corrupt = [&](const std::string& why, std::vector<std::string> keys) -> Image {
    {
      std::lock_guard<std::mutex> lock(st_mu_);
      ++st_.corrupt;
    }
    log("redis: object " + key + " is a miss (" + why + "), deleting it");
    conn.abandon();  // replies of the pipeline may be left unread
    std::string expect = mr->type == REDIS_REPLY_STRING ? std::string(mr->str, mr->len) : "";
    if (keys.empty()) keys.push_back(mkey);
    enqueue(Job{Job::Kind::kDeleteIf, key, nullptr, std::move(keys), std::move(expect)}, false);
    return nullptr;
  };
  if (mr->type != REDIS_REPLY_STRING) return corrupt("manifest key holds a non-string", {});
  ro::Manifest m;
  std::string why;
  if (!ro::decode_manifest(reinterpret_cast<const uint8_t*>(mr->str), mr->len, key,
                           cfg_.max_object_bytes, &m, &why)) {
    return corrupt(why, {});
  }
  std::vector<std::string> keys = object_keys(cfg_, key, m);
  for (size_t i = 1; i < keys.size(); ++i) conn.append({"GET", keys[i]});
  r = conn.send(deadline, &err);
  // Parts are checked and copied as they arrive, one reply alive at a time.
  auto out = std::make_shared<std::vector<uint8_t>>();
  out->reserve(m.total_size);
  advise_huge_pages(out->data(), m.total_size);  // before the parts first touch it
  for (uint32_t i = 0; r == IoResult::kOk && i < m.parts.size(); ++i) {
    RedisReply pr;
    r = conn.read(deadline, &pr, &err);
    if (r != IoResult::kOk) break;
    if (pr->type == REDIS_REPLY_NIL) return corrupt("part " + std::to_string(i) + " missing", keys);
    if (pr->type != REDIS_REPLY_STRING) return corrupt("part holds a non-string", keys);
    const uint8_t* payload = nullptr;
    if (!ro::check_part(m, i, reinterpret_cast<const uint8_t*>(pr->str), pr->len, &payload, &why)) {
      return corrupt("part " + std::to_string(i) + ": " + why, keys);
    }
    out->insert(out->end(), payload, payload + m.parts[i].size);
  }
  if (r != IoResult::kOk) {
    // The manifest came back in time, so Redis is alive: a large object slower than the
    // deadline is a miss, but only an I/O error counts against the breaker.
    if (r == IoResult::kTimeout) {
      std::lock_guard<std::mutex> lock(st_mu_);
      ++st_.timeouts;
    } else {
      note_failure("GET parts", err);
    }
    return nullptr;
  }
  if (XXH3_64bits(out->data(), out->size()) != m.total_checksum) {
    return corrupt("object checksum", keys);
  }
  {
    std::lock_guard<std::mutex> lock(st_mu_);
    ++st_.hits;
  }
  enqueue(Job{Job::Kind::kTouch, key, nullptr, std::move(keys), {}}, false);
  return out;
}

std::vector<bool> RedisTier::contains(const std::vector<std::string>& keys, Deadline deadline) {
  std::vector<bool> out(keys.size(), false);
  if (keys.empty() || !breaker_.allow(Clock::now())) return out;
  bool reused = false;
  auto conn = acquire(deadline, &reused);
  if (!conn) return out;
  for (const auto& k : keys) conn->append({"EXISTS", ro::manifest_key(cfg_.prefix, k)});
  std::string err;
  IoResult r = conn->send(deadline, &err);
  for (size_t i = 0; r == IoResult::kOk && i < keys.size(); ++i) {
    RedisReply rep;
    r = conn->read(deadline, &rep, &err);
    if (r == IoResult::kOk) out[i] = rep->type == REDIS_REPLY_INTEGER && rep->integer > 0;
  }
  if (r == IoResult::kOk) {
    note_success();
  } else {
    if (r == IoResult::kTimeout) {
      std::lock_guard<std::mutex> lock(st_mu_);
      ++st_.timeouts;
    }
    note_failure("EXISTS", err);
    std::fill(out.begin(), out.end(), false);
  }
  release(std::move(conn));
  return out;
}

TierStats RedisTier::stats() const {
  std::lock_guard<std::mutex> lock(st_mu_);
  TierStats s = st_;
  s.available = breaker_.closed();
  return s;
}

bool RedisTier::drain(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(q_mu_);
  return idle_cv_.wait_for(lock, timeout, [&] { return queue_.empty() && !busy_; });
}

}  // namespace geist_cache
