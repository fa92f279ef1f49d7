// geist's OpenAI-compatible HTTP server (docs/SERVER.md): routes, auth, body limits and the
// OpenAI schema over the serving scheduler. Uses only the public C ABI and src/serving.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "geist/geist.h"
#include "geist/geist_chat.h"
#include "server/api_error.h"
#include "server/sessions.h"
#include "serving/scheduler.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace geist_server {

struct ServerConfig {
  std::string model_path;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string alias;    // model id in responses; default: the file name
  std::string api_key;  // "": no auth
  std::string chat_template_file;
  size_t max_body_bytes = 8u << 20;
  int ping_ms = 1000;   // SSE ": ping" after this long without data
  int32_t backend = 0;  // geist_backend
  geist_serving::SchedulerConfig sched;
  // Tiers (docs/SERVER.md "Tiers"): the disk tier's directory ("": none) and budget, and the
  // idle time after which named sessions are parked out of RAM into the tiers (0: never).
  std::string cache_dir;
  size_t cache_disk_bytes = size_t{4096} << 20;
  int32_t park_after_s = 0;
  // The Redis tier ("": none), below the disk: its URL, a password when the URL has none, and
  // the objects' expiry (refreshed on hit).
  std::string redis_url, redis_password;
  int32_t redis_ttl_s = 86400;
};

class Server {
 public:
  explicit Server(ServerConfig cfg);
  ~Server();
  // Binds, answers /health with 503 while the model loads, then serves until stop() (from a
  // signal handler thread or another thread). Returns the process exit code.
  int run();
  void stop();

  // Used by the handlers (server/*.cpp).
  const ServerConfig& cfg() const { return cfg_; }
  geist_model* model() const { return model_; }
  geist_serving::Scheduler& scheduler() { return *sched_; }
  bool ready() const { return ready_.load(); }
  std::string next_id(const char* prefix);
  // Renders a chat request (messages, tools, chat_template_kwargs) to prompt text.
  bool render_chat(const json& body, bool add_generation_prompt, std::string* out, ApiError* err);
  geist_chat_template* chat_template() const { return tmpl_; }
  // Tokenizes prompt text (special tokens parsed; BOS as the model adds it, never twice).
  bool tokenize(const std::string& text, bool add_special, std::vector<geist_token>* out,
                ApiError* err);
  std::string piece(geist_token t);

  SessionStore sessions;
  std::atomic<int64_t> http_requests{0}, http_errors{0}, rejected_queue_full{0};

 private:
  void routes();
  bool load(std::string* err);
  void park_loop();

  ServerConfig cfg_;
  std::unique_ptr<httplib::Server> http_;
  geist_model* model_ = nullptr;
  geist_chat_template* tmpl_ = nullptr;
  std::mutex tmpl_mu_;  // the template's last-error text is per template
  std::unique_ptr<geist_serving::Scheduler> sched_;
  std::atomic<bool> ready_{false};
  std::mutex park_mu_;
  std::condition_variable park_cv_;
  bool park_stop_ = false;
  std::thread park_thread_;
  std::atomic<uint64_t> id_counter_{0};
  uint64_t id_salt_ = 0;
};

// Handlers, one file per concern.
// chat: /v1/chat/completions rules. sess: continue this session (its messages come first).
void handle_completion(Server& s, const httplib::Request& req, httplib::Response& res, bool chat,
                       std::shared_ptr<ChatSession> sess = nullptr);
void register_chat_page(httplib::Server& h);
void handle_metrics(Server& s, const httplib::Request& req, httplib::Response& res);
void send_error(httplib::Response& res, const ApiError& e);
void send_json(httplib::Response& res, const json& j, int status = 200);

}  // namespace geist_server
