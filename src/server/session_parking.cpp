// Parking named sessions in the prefix cache's tiers (--park-after) and finding them there by
// id: the image under the content key of (namespace, tokens), like any cache entry, and a
// record of the conversation (messages, rendered text) under the session's name.
#include <chrono>
#include <cstdio>

#include "server/server.h"
#include "server/sessions.h"

namespace geist_server {

namespace {

std::vector<uint8_t> record_of(const ChatSession& cs) {
  const std::string j = dump(json{{"messages", cs.messages},
                                  {"text", cs.text},
                                  {"text_known", cs.text_known},
                                  {"image_bytes", cs.image ? cs.image->size() : cs.image_bytes}});
  return std::vector<uint8_t>(j.begin(), j.end());
}

}  // namespace

std::string session_record(Server& s, const std::string& id) {
  return s.scheduler().cache_namespace("") + "/session:" + id;
}

std::shared_ptr<ChatSession> find_session(Server& s, const std::string& id) {
  if (auto ss = s.sessions.get(id)) return ss;
  geist_cache::PrefixCache* cache = s.scheduler().cache();
  if (cache == nullptr || !cache->has_tiers()) return nullptr;
  std::vector<geist_token> toks;
  std::vector<uint8_t> payload;
  if (!cache->get_record(session_record(s, id),
                         std::chrono::steady_clock::now() + std::chrono::seconds(2), &toks,
                         &payload)) {
    return nullptr;
  }
  const json j = json::parse(payload.begin(), payload.end(), nullptr, false);
  if (!j.is_object() || !j.contains("messages") || !j["messages"].is_array() ||
      !j.contains("text") || !j["text"].is_string()) {
    return nullptr;  // passed the checksums: written by a server with another idea of records
  }
  auto ss = std::make_shared<ChatSession>();
  ss->messages = j["messages"];
  ss->text = j["text"].get<std::string>();
  ss->text_known = j.value("text_known", false);
  ss->image_bytes = j.value("image_bytes", size_t{0});
  ss->tokens = std::move(toks);
  ss->parked = true;
  ss->last_use_ms = geist_serving::now_ms();
  std::string why;
  if (!s.sessions.put_new(id, ss, &why)) return s.sessions.get(id);  // raced, or store full
  ++s.sessions.found_in_tier;
  return ss;
}

bool session_resident(Server& s, ChatSession& cs, ApiError* err) {
  if (!cs.parked) return true;
  geist_serving::Scheduler& sched = s.scheduler();
  geist_cache::Image img;
  if (geist_cache::PrefixCache* cache = sched.cache()) {
    img = cache->load_from_tiers(sched.cache_namespace(""), cs.tokens,
                                 std::chrono::steady_clock::now() + std::chrono::seconds(10));
  }
  if (img) {
    ++s.sessions.resumed_from_tier;
  } else {
    // Evicted from every tier: the state is computed again from the tokens (bit-identical for
    // attention models; for hybrids the chunking of the original turns may differ).
    std::vector<uint8_t> fresh;
    if (!prefill_state(s, cs.tokens, &fresh, err)) return false;
    img = std::make_shared<const std::vector<uint8_t>>(std::move(fresh));
    ++s.sessions.resumed_by_prefill;
    std::fprintf(stderr, "geist serve: a parked session's state was in no tier: prefilled again\n");
  }
  cs.image = std::move(img);
  cs.image_bytes = cs.image->size();
  cs.parked = false;
  cs.park_wait = 0;
  return true;
}

void park_idle_sessions(Server& s, double idle_ms) {
  geist_cache::PrefixCache* cache = s.scheduler().cache();
  if (cache == nullptr || !cache->has_tiers()) return;
  const std::string ns = s.scheduler().cache_namespace("");
  const double now = geist_serving::now_ms();
  for (const std::string& id : s.sessions.ids()) {
    auto ss = s.sessions.get(id);
    if (!ss) continue;
    geist_cache::Image img;
    std::vector<geist_token> toks;
    bool check = false;
    {
      std::lock_guard<std::mutex> lock(ss->mu);
      if (ss->busy || ss->parked || !ss->image || ss->tokens.empty() ||
          now - ss->last_use_ms < idle_ms) {
        continue;
      }
      // Queued once, then checked on the following sweeps; queued again after 10 sweeps
      // without a tier holding it (its write was dropped: queue full, writes paused).
      if (ss->park_wait == 0 || ss->park_wait > 10) {
        cache->store_in_tiers(ns, ss->tokens, ss->image);
        cache->put_record(session_record(s, id), ss->tokens, record_of(*ss));
        ss->park_wait = 1;
        continue;
      }
      ++ss->park_wait;
      img = ss->image;
      toks = ss->tokens;
      check = true;
    }
    if (!check || !cache->in_tiers(ns, toks)) continue;
    std::lock_guard<std::mutex> lock(ss->mu);
    if (ss->busy || ss->image != img || ss->tokens != toks) continue;  // used meanwhile
    ss->image.reset();
    ss->parked = true;
    ss->park_wait = 0;
    ++s.sessions.parked_total;
  }
}

void save_all_sessions(Server& s) {
  geist_cache::PrefixCache* cache = s.scheduler().cache();
  if (cache == nullptr || !cache->has_tiers()) return;
  const std::string ns = s.scheduler().cache_namespace("");
  int queued = 0;
  for (const std::string& id : s.sessions.ids()) {
    auto ss = s.sessions.get(id);
    if (!ss) continue;
    {
      std::lock_guard<std::mutex> lock(ss->mu);
      if (ss->tokens.empty()) continue;
      if (ss->image) cache->store_in_tiers(ns, ss->tokens, ss->image);
      cache->put_record(session_record(s, id), ss->tokens, record_of(*ss));
    }
    if (++queued % 16 == 0) cache->flush_to_tiers();  // the write-through queue is bounded
  }
  cache->flush_to_tiers();
}

}  // namespace geist_server
