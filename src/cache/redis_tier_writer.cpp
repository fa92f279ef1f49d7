// The Redis tier's writer thread: puts (parts first, the manifest last), erases, TTL refreshes,
// conditional deletes of bad objects, and the INFO / DBSIZE poll behind TierStats.
#include <hiredis/hiredis.h>
#include <xxhash.h>

#include <charconv>

#include "cache/redis_object.h"
#include "cache/redis_tier.h"

namespace geist_cache {
namespace ro = redis_object;
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kDeleteIfScript =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', unpack(KEYS)) "
    "else return 0 end";

bool is_ok(const RedisReply& r) {
  return r && r->type == REDIS_REPLY_STATUS && r->len == 2 && r->str[0] == 'O' && r->str[1] == 'K';
}

std::string reply_text(const RedisReply& r) {
  if (r && (r->type == REDIS_REPLY_ERROR || r->type == REDIS_REPLY_STATUS)) {
    return std::string(r->str, r->len);
  }
  return "reply of type " + std::to_string(r ? r->type : -1);
}

// A field of INFO's "name:value" lines.
int64_t info_field(std::string_view info, std::string_view name) {
  size_t pos = 0;
  while ((pos = info.find(name, pos)) != std::string_view::npos) {
    if ((pos == 0 || info[pos - 1] == '\n') && pos + name.size() < info.size() &&
        info[pos + name.size()] == ':') {
      int64_t v = 0;
      const char* b = info.data() + pos + name.size() + 1;
      std::from_chars(b, info.data() + info.size(), v);
      return v;
    }
    pos += name.size();
  }
  return 0;
}

}  // namespace

void RedisTier::writer_loop() {
  std::unique_ptr<RedisConn> conn;
  auto next_stats = Clock::now();
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(q_mu_);
      busy_ = false;
      if (queue_.empty()) idle_cv_.notify_all();
      q_cv_.wait_until(lock, next_stats, [&] { return stop_ || !queue_.empty(); });
      if (stop_) {
        int64_t puts = 0;
        for (const auto& j : queue_) puts += j.kind == Job::Kind::kPut;
        queue_.clear();
        queued_bytes_ = 0;
        idle_cv_.notify_all();
        std::lock_guard<std::mutex> st(st_mu_);
        st_.dropped += puts;
        return;
      }
      if (queue_.empty()) {
        lock.unlock();
        if (breaker_.allow(Clock::now())) refresh_stats(conn);  // doubles as the probe
        next_stats = Clock::now() + cfg_.stats_every;
        continue;
      }
      job = std::move(queue_.front());
      queue_.pop_front();
      queued_bytes_ -= job.object ? job.object->size() : 0;
      busy_ = true;
    }
    if (!breaker_.allow(Clock::now()) || !writer_conn(conn)) {
      if (job.kind == Job::Kind::kPut) {
        std::lock_guard<std::mutex> st(st_mu_);
        ++st_.dropped;
      }
      continue;
    }
    if (job.kind == Job::Kind::kPut) {
      write_object(conn, job);
    } else {
      run_small(conn, job);
    }
    if (conn && conn->broken()) conn.reset();
  }
}

bool RedisTier::writer_conn(std::unique_ptr<RedisConn>& conn) {
  if (conn && !conn->broken()) return true;
  IoResult r;
  std::string err;
  conn = RedisConn::open(cfg_.endpoint, Clock::now() + cfg_.write_timeout, &r, &err);
  if (!conn) note_failure("connect (writer)", err);
  return conn != nullptr;
}

void RedisTier::write_object(std::unique_ptr<RedisConn>& conn, const Job& job) {
  const std::string mkey = ro::manifest_key(cfg_.prefix, job.key);
  const std::string ttl = std::to_string(cfg_.ttl_seconds * 1000);
  const uint8_t* data = job.object->data();
  const size_t n = job.object->size();
  std::string err;
  auto io_fail = [&](const std::string& what) {
    note_failure(what, err);
    std::lock_guard<std::mutex> st(st_mu_);
    ++st_.put_errors;
  };
  // Content-addressed: a replica may have stored this object already. If its manifest reads
  // back sound and for the same bytes, refresh its TTL instead of moving it again.
  RedisReply r;
  if (conn->command({"GET", mkey}, Clock::now() + cfg_.write_timeout, &r, &err) != IoResult::kOk) {
    return io_fail("GET manifest (writer)");
  }
  ro::Manifest have;
  if (r->type == REDIS_REPLY_STRING &&
      ro::decode_manifest(reinterpret_cast<const uint8_t*>(r->str), r->len, job.key,
                          cfg_.max_object_bytes, &have, nullptr) &&
      have.total_size == n && have.total_checksum == XXH3_64bits(data, n)) {
    Job touch{Job::Kind::kTouch, job.key, nullptr, {mkey}, {}};
    for (uint32_t i = 0; i < have.parts.size(); ++i) {
      touch.keys.push_back(ro::part_key(cfg_.prefix, job.key, have.write_id, i));
    }
    run_small(conn, touch);
    note_success();
    std::lock_guard<std::mutex> st(st_mu_);
    ++st_.puts;
    return;
  }
  const ro::Manifest m = ro::plan(job.key, data, n, rng_(), cfg_.part_bytes);
  std::vector<std::string> written;
  auto refused = [&](const RedisReply& rep) {
    // Redis answered but refused (full: OOM under maxmemory with noeviction). Take back the
    // parts already stored; the object is simply not in this tier.
    log("redis: write of " + job.key + " refused: " + reply_text(rep));
    for (const auto& k : written) conn->append({"DEL", k});
    RedisReply ignored;
    if (conn->send(Clock::now() + cfg_.write_timeout, &err) == IoResult::kOk) {
      for (size_t i = 0; i < written.size(); ++i) {
        if (conn->read(Clock::now() + cfg_.write_timeout, &ignored, &err) != IoResult::kOk) break;
      }
    }
    std::lock_guard<std::mutex> st(st_mu_);
    ++st_.put_errors;
  };
  for (uint32_t i = 0; i < m.parts.size(); ++i) {
    const std::vector<uint8_t> value = ro::encode_part(m, i, data);
    std::string pkey = ro::part_key(cfg_.prefix, job.key, m.write_id, i);
    const std::string_view v(reinterpret_cast<const char*>(value.data()), value.size());
    if (conn->command({"SET", pkey, v, "PX", ttl}, Clock::now() + cfg_.write_timeout, &r, &err) !=
        IoResult::kOk) {
      return io_fail("SET part");
    }
    if (!is_ok(r)) return refused(r);
    written.push_back(std::move(pkey));
  }
  // The manifest last: until it lands, no reader can see the object.
  const std::vector<uint8_t> mv = ro::encode_manifest(m);
  const std::string_view v(reinterpret_cast<const char*>(mv.data()), mv.size());
  if (conn->command({"SET", mkey, v, "PX", ttl}, Clock::now() + cfg_.write_timeout, &r, &err) !=
      IoResult::kOk) {
    return io_fail("SET manifest");
  }
  if (!is_ok(r)) return refused(r);
  note_success();
  std::lock_guard<std::mutex> st(st_mu_);
  ++st_.puts;
}

void RedisTier::run_small(std::unique_ptr<RedisConn>& conn, const Job& job) {
  const auto deadline = Clock::now() + cfg_.write_timeout;
  std::string err;
  std::vector<std::string> keys = job.keys;
  const std::string ttl = std::to_string(cfg_.ttl_seconds * 1000);
  size_t n_replies = 0;
  if (job.kind == Job::Kind::kErase) {
    const std::string mkey = ro::manifest_key(cfg_.prefix, job.key);
    RedisReply r;
    if (conn->command({"GET", mkey}, deadline, &r, &err) != IoResult::kOk) {
      return note_failure("GET manifest (erase)", err);
    }
    keys = {mkey};
    ro::Manifest m;
    if (r->type == REDIS_REPLY_STRING &&
        ro::decode_manifest(reinterpret_cast<const uint8_t*>(r->str), r->len, job.key,
                            cfg_.max_object_bytes, &m, nullptr)) {
      for (uint32_t i = 0; i < m.parts.size(); ++i) {
        keys.push_back(ro::part_key(cfg_.prefix, job.key, m.write_id, i));
      }
    }
    std::vector<std::string_view> argv{"DEL"};
    argv.insert(argv.end(), keys.begin(), keys.end());
    conn->append(argv);
    n_replies = 1;
  } else if (job.kind == Job::Kind::kTouch) {
    for (const auto& k : keys) conn->append({"PEXPIRE", k, ttl});
    n_replies = keys.size();
  } else if (job.expect.empty()) {  // kDeleteIf of a manifest key holding no string at all
    std::vector<std::string_view> argv{"DEL"};
    argv.insert(argv.end(), keys.begin(), keys.end());
    conn->append(argv);
    n_replies = 1;
  } else {  // kDeleteIf
    const std::string numkeys = std::to_string(keys.size());
    std::vector<std::string_view> argv{"EVAL", kDeleteIfScript, numkeys};
    argv.insert(argv.end(), keys.begin(), keys.end());
    argv.push_back(job.expect);
    conn->append(argv);
    n_replies = 1;
  }
  IoResult res = conn->send(deadline, &err);
  for (size_t i = 0; res == IoResult::kOk && i < n_replies; ++i) {
    RedisReply r;
    res = conn->read(deadline, &r, &err);
    if (res == IoResult::kOk && r->type == REDIS_REPLY_ERROR) log("redis: " + reply_text(r));
  }
  if (res != IoResult::kOk) return note_failure("writer command", err);
  note_success();
}

void RedisTier::refresh_stats(std::unique_ptr<RedisConn>& conn) {
  if (!writer_conn(conn)) return;
  const auto deadline = Clock::now() + cfg_.write_timeout;
  std::string err;
  conn->append({"INFO", "memory"});
  conn->append({"DBSIZE"});
  RedisReply info, dbsize;
  if (conn->send(deadline, &err) != IoResult::kOk ||
      conn->read(deadline, &info, &err) != IoResult::kOk ||
      conn->read(deadline, &dbsize, &err) != IoResult::kOk) {
    conn.reset();
    return note_failure("INFO", err);
  }
  note_success();
  std::lock_guard<std::mutex> st(st_mu_);
  if (info->type == REDIS_REPLY_STRING || info->type == REDIS_REPLY_STATUS) {
    const std::string_view text(info->str, info->len);
    st_.bytes = info_field(text, "used_memory");
    st_.budget = info_field(text, "maxmemory");
  }
  if (dbsize->type == REDIS_REPLY_INTEGER) st_.objects = dbsize->integer;
}

}  // namespace geist_cache
