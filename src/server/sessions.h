// Named sessions over HTTP (docs/SERVER.md "Sessions"): a conversation and the snapshot image
// of the state after its rendered prompt, kept in RAM; created, forked, read and written as
// images, continued with chat requests, deleted.
#pragma once

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
  geist_cache::Image image;  // the state after prefilling `tokens`
  bool busy = false;         // a request is continuing it
};

class SessionStore {
 public:
  static constexpr size_t kMaxSessions = 256;
  std::shared_ptr<ChatSession> get(const std::string& id);
  // False when the id is taken or the store is full.
  bool put_new(const std::string& id, std::shared_ptr<ChatSession> s, std::string* why);
  bool erase(const std::string& id);
  std::vector<std::string> ids();

 private:
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<ChatSession>> map_;
};

void register_session_routes(Server& s, httplib::Server& h);

}  // namespace geist_server
