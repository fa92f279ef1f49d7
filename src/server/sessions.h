// Named sessions over HTTP (docs/SERVER.md "Sessions"): a conversation and the snapshot image
// of the state after its rendered prompt, kept in RAM; created, forked, read and written as
// images, continued with chat requests, deleted.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cache/prefix_cache.h"
#include "server/api_error.h"

namespace httplib {
class Server;
}

namespace geist_server {

class Server;

struct ChatSession {
  std::mutex mu;
  json messages = json::array();  // the conversation so far
  bool text_known = true;         // false after a PUT of a foreign image
  std::string text;               // the rendered prompt that `tokens` are
  std::vector<geist_token> tokens;
  geist_cache::Image image;  // the state after prefilling `tokens`; null while parked
  bool busy = false;         // a request is continuing it
  // Parking (--park-after): the image moves to the tiers under the key of (namespace,
  // tokens) and is read back on use. image_bytes stays its size.
  size_t image_bytes = 0;
  bool parked = false;
  int32_t park_wait = 0;  // sweeps since its image was queued for the tiers (0: not queued)
  double last_use_ms = 0;
};

class SessionStore {
 public:
  static constexpr size_t kMaxSessions = 256;
  std::shared_ptr<ChatSession> get(const std::string& id);
  // False when the id is taken or the store is full.
  bool put_new(const std::string& id, std::shared_ptr<ChatSession> s, std::string* why);
  bool erase(const std::string& id);
  std::vector<std::string> ids();

  std::atomic<int64_t> parked_total{0}, resumed_from_tier{0}, resumed_by_prefill{0};
  std::atomic<int64_t> found_in_tier{0};  // sessions unknown here taken from a tier's record

 private:
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<ChatSession>> map_;
};

void register_session_routes(Server& s, httplib::Server& h);

// Prefills tokens in a sequence and returns the image of the resulting state (sessions.cpp).
bool prefill_state(Server& s, const std::vector<geist_token>& tokens, std::vector<uint8_t>* out,
                   ApiError* err);

// Parking (session_parking.cpp, docs/SERVER.md "Tiers").
// The session `id` in RAM, or else the one a tier holds a record of (parked by this or another
// server sharing the tier: it is taken into RAM, still parked); null when neither has it.
std::shared_ptr<ChatSession> find_session(Server& s, const std::string& id);
// The name of a session's record in the tiers.
std::string session_record(Server& s, const std::string& id);
// Brings a parked session's image back (caller holds cs.mu): from the tiers, verified, or,
// when no tier has it any more, by prefilling its tokens again. False with *err when neither
// worked.
bool session_resident(Server& s, ChatSession& cs, ApiError* err);
// One sweep of --park-after: sessions idle that long have their image and their record written
// to the tiers, and the image dropped from RAM once a tier holds it.
void park_idle_sessions(Server& s, double idle_ms);
// At shutdown (with --park-after): every session in RAM written to the tiers, so a restarted
// server (or another sharing them) finds it as it is now.
void save_all_sessions(Server& s);

}  // namespace geist_server
