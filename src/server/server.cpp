#include "server/server.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "geist/geist_util.h"
#include "server/openai_params.h"
#include "server/tier_chain.h"

namespace geist_server {

void send_json(httplib::Response& res, const json& j, int status) {
  res.status = status;
  res.set_content(dump(j), "application/json; charset=utf-8");
}

void send_error(httplib::Response& res, const ApiError& e) {
  send_json(res, error_json(e), e.status);
}

Server::Server(ServerConfig cfg)
    : cfg_(std::move(cfg)), http_(std::make_unique<httplib::Server>()) {
  std::random_device rd;
  id_salt_ = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  if (cfg_.alias.empty()) {
    const size_t slash = cfg_.model_path.find_last_of('/');
    cfg_.alias = slash == std::string::npos ? cfg_.model_path : cfg_.model_path.substr(slash + 1);
  }
}

Server::~Server() {
  {
    std::lock_guard<std::mutex> lock(park_mu_);
    park_stop_ = true;
  }
  park_cv_.notify_all();
  if (park_thread_.joinable()) park_thread_.join();
  if (sched_ && cfg_.park_after_s > 0) save_all_sessions(*this);
  sched_.reset();  // sessions go before the model
  geist_chat_template_free(tmpl_);
  geist_model_free(model_);
}

std::string Server::next_id(const char* prefix) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s%08llx%06llx", prefix,
                static_cast<unsigned long long>(id_salt_ & 0xffffffffull),
                static_cast<unsigned long long>(++id_counter_));
  return buf;
}

std::string Server::piece(geist_token t) {
  char buf[256];
  size_t n = 0;
  if (geist_token_to_piece(model_, t, buf, sizeof buf, &n) == GEIST_OK) return std::string(buf, n);
  std::string big(n, '\0');
  if (geist_token_to_piece(model_, t, big.data(), big.size(), &n) != GEIST_OK) return "";
  big.resize(n);
  return big;
}

bool Server::tokenize(const std::string& text, bool add_special, std::vector<geist_token>* out,
                      ApiError* err) {
  size_t n = 0;
  out->assign(text.size() + 8, 0);
  geist_status st = geist_tokenize(model_, text.data(), text.size(), add_special ? 1 : 0, 1,
                                   out->data(), out->size(), &n);
  if (st == GEIST_E_INVALID_ARG && n > out->size()) {
    out->assign(n, 0);
    st = geist_tokenize(model_, text.data(), text.size(), add_special ? 1 : 0, 1, out->data(),
                        out->size(), &n);
  }
  if (st != GEIST_OK) {
    err->status = 500;
    err->type = "server_error";
    err->message = std::string("tokenization failed: ") + geist_model_last_error(model_);
    return false;
  }
  out->resize(n);
  const geist_token bos = geist_model_token_bos(model_);
  if (out->size() >= 2 && bos >= 0 && (*out)[0] == bos && (*out)[1] == bos)
    out->erase(out->begin());
  return true;
}

bool Server::render_chat(const json& body, bool add_generation_prompt, std::string* out,
                         ApiError* err) {
  json r;
  if (auto e = chat_render_request(body, add_generation_prompt, &r)) {
    *err = *e;
    return false;
  }
  const std::string req = dump(r);
  std::lock_guard<std::mutex> lock(tmpl_mu_);
  size_t n = 0;
  geist_status st = geist_chat_render(tmpl_, req.data(), req.size(), nullptr, 0, &n);
  if (st == GEIST_E_INVALID_ARG && n > 0) {
    out->assign(n, '\0');
    st = geist_chat_render(tmpl_, req.data(), req.size(), out->data(), out->size(), &n);
  } else if (st == GEIST_OK) {
    out->clear();
  }
  if (st != GEIST_OK) {
    *err = bad_param("messages", std::string("cannot render the conversation with the chat "
                                             "template: ") +
                                     geist_chat_template_last_error(tmpl_));
    return false;
  }
  out->resize(n);
  return true;
}

bool Server::load(std::string* err) {
  geist_model_params mp;
  geist_model_params_default(&mp);
  mp.backend = cfg_.backend;
  char buf[1024] = {};
  if (geist_model_load(cfg_.model_path.c_str(), &mp, &model_, buf, sizeof buf) != GEIST_OK) {
    *err = "cannot load model '" + cfg_.model_path + "': " + buf;
    return false;
  }
  char ebuf[1024] = {};
  if (!cfg_.chat_template_file.empty()) {
    FILE* f = std::fopen(cfg_.chat_template_file.c_str(), "rb");
    if (f == nullptr) {
      *err = "cannot read --chat-template '" + cfg_.chat_template_file + "'";
      return false;
    }
    std::string src;
    char chunk[4096];
    size_t k = 0;
    while ((k = std::fread(chunk, 1, sizeof chunk, f)) > 0) src.append(chunk, k);
    std::fclose(f);
    const geist_token bos = geist_model_token_bos(model_), eos = geist_model_token_eos(model_);
    const std::string bos_s = bos >= 0 ? piece(bos) : "", eos_s = eos >= 0 ? piece(eos) : "";
    if (geist_chat_template_create(src.data(), src.size(), bos_s.c_str(), eos_s.c_str(), &tmpl_,
                                   ebuf, sizeof ebuf) != GEIST_OK) {
      *err = "cannot use --chat-template '" + cfg_.chat_template_file + "': " + ebuf;
      return false;
    }
  } else {
    int fallback = 0;
    if (geist_chat_template_from_model(model_, nullptr, &tmpl_, &fallback, ebuf, sizeof ebuf) !=
        GEIST_OK) {
      *err = std::string("cannot read the model's chat template: ") + ebuf;
      return false;
    }
    if (fallback)
      std::fprintf(stderr, "geist serve: the model has no chat template: using ChatML\n");
  }
  std::vector<std::unique_ptr<geist_cache::Tier>> tiers;
  if (!build_tier_chain(cfg_, &tiers, err)) return false;
  if (cfg_.park_after_s > 0 && tiers.empty()) {
    *err = "--park-after needs a tier to park sessions in (--cache-dir or --redis)";
    return false;
  }
  sched_ = std::make_unique<geist_serving::Scheduler>(model_, cfg_.sched, std::move(tiers));
  if (!sched_->start(err)) return false;
  if (cfg_.park_after_s > 0) park_thread_ = std::thread([this] { park_loop(); });
  return true;
}

void Server::park_loop() {
  // Sweeps twice per --park-after, at most once a second.
  const auto every =
      std::chrono::milliseconds(std::min<int64_t>(1000, int64_t{cfg_.park_after_s} * 500));
  std::unique_lock<std::mutex> lock(park_mu_);
  while (!park_cv_.wait_for(lock, every, [&] { return park_stop_; })) {
    lock.unlock();
    park_idle_sessions(*this, cfg_.park_after_s * 1000.0);
    lock.lock();
  }
}

void Server::stop() { http_->stop(); }

int Server::run() {
  routes();
  const int n_threads = cfg_.sched.n_parallel + cfg_.sched.queue_max + 8;
  http_->new_task_queue = [n_threads] { return new httplib::ThreadPool(n_threads); };
  http_->set_payload_max_length(cfg_.max_body_bytes);
  http_->set_read_timeout(30, 0);
  http_->set_write_timeout(30, 0);
  if (!http_->bind_to_port(cfg_.host, cfg_.port)) {
    std::fprintf(stderr, "geist serve: cannot listen on %s:%d\n", cfg_.host.c_str(), cfg_.port);
    return 1;
  }
  std::thread listener([this] { http_->listen_after_bind(); });
  std::fprintf(stderr, "geist serve: loading %s\n", cfg_.model_path.c_str());
  std::string err;
  if (!load(&err)) {
    std::fprintf(stderr, "geist serve: %s\n", err.c_str());
    http_->stop();
    listener.join();
    return 1;
  }
  ready_ = true;
  std::fprintf(
      stderr, "geist serve: listening on http://%s:%d (model '%s', %d sequences of %d tokens)\n",
      cfg_.host.c_str(), cfg_.port, cfg_.alias.c_str(), cfg_.sched.n_parallel, sched_->n_ctx());
  listener.join();
  return 0;
}

namespace {

bool key_ok(const Server& s, const httplib::Request& req) {
  if (s.cfg().api_key.empty()) return true;
  const std::string auth = req.get_header_value("Authorization");
  if (auth == "Bearer " + s.cfg().api_key) return true;
  return req.get_header_value("X-Api-Key") == s.cfg().api_key;
}

}  // namespace

void Server::routes() {
  httplib::Server& h = *http_;
  h.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    ++http_requests;
    if (req.path == "/health" || req.path == "/" || req.method == "OPTIONS") {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    if (!key_ok(*this, req)) {
      ApiError e;
      e.status = 401;
      e.type = "authentication_error";
      e.code = "invalid_api_key";
      e.message = "Invalid or missing API key (send 'Authorization: Bearer KEY')";
      send_error(res, e);
      return httplib::Server::HandlerResponse::Handled;
    }
    if (!ready_.load()) {
      ApiError e;
      e.status = 503;
      e.type = "unavailable_error";
      e.message = "Loading model";
      res.set_header("Retry-After", "1");
      send_error(res, e);
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  h.set_error_handler(
      httplib::Server::HandlerWithResponse([this](const httplib::Request&, httplib::Response& res) {
        ++http_errors;
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        ApiError e;
        e.status = res.status;
        if (res.status == 413) {
          e.message = "the request body is larger than the limit of " +
                      std::to_string(cfg_.max_body_bytes) + " bytes";
          e.code = "request_too_large";
        } else if (res.status == 404) {
          e.type = "not_found_error";
          e.message = "no such endpoint";
        } else {
          e.type = res.status >= 500 ? "server_error" : "invalid_request_error";
          e.message = "HTTP error " + std::to_string(res.status);
        }
        send_error(res, e);
        return httplib::Server::HandlerResponse::Handled;
      }));
  h.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    ApiError e;
    e.status = 500;
    e.type = "server_error";
    e.message = "internal error";
    send_error(res, e);
  });

  // One line per request: generations log their own (tokens, TTFT, speed); every other request
  // is logged here, except successful /health and /metrics polls.
  h.set_logger([](const httplib::Request& req, const httplib::Response& res) {
    const bool gen = req.path.find("completions") != std::string::npos;
    if (gen && (res.status < 400 || res.status == 499)) return;  // logged by the generation
    if (res.status < 400 && (req.path == "/health" || req.path == "/metrics")) return;
    std::string why;
    if (res.status >= 400) {
      const json j = json::parse(res.body, nullptr, false);
      if (j.is_object() && j.contains("error") && j["error"].is_object()) {
        why = " error=" + j["error"].value("type", std::string()) + ": " +
              j["error"].value("message", std::string());
      }
    }
    std::fprintf(stderr, "geist serve: - %s %s status=%d%s\n", req.method.c_str(), req.path.c_str(),
                 res.status, why.c_str());
  });
  h.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (!ready_.load()) {
      ApiError e;
      e.status = 503;
      e.type = "unavailable_error";
      e.message = "Loading model";
      res.set_header("Retry-After", "1");
      send_error(res, e);
      return;
    }
    send_json(res, json{{"status", "ok"}});
  });
  auto models = [this](const httplib::Request&, httplib::Response& res) {
    json m = {{"id", cfg_.alias},
              {"object", "model"},
              {"created", static_cast<int64_t>(std::time(nullptr))},
              {"owned_by", "geist"},
              {"meta",
               {{"n_vocab", geist_model_n_vocab(model_)},
                {"n_ctx_train", geist_model_n_ctx_train(model_)},
                {"n_ctx", sched_->n_ctx()},
                {"n_parallel", cfg_.sched.n_parallel}}}};
    send_json(res, json{{"object", "list"}, {"data", json::array({m})}});
  };
  h.Get("/v1/models", models);
  h.Get("/props", [this](const httplib::Request&, httplib::Response& res) {  // as llama-server
    send_json(res, json{{"model_alias", cfg_.alias},
                        {"model_path", cfg_.model_path},
                        {"total_slots", cfg_.sched.n_parallel},
                        {"n_ctx", sched_->n_ctx()},
                        // geist's: where prefixes are checkpointed and reused (docs/SERVER.md)
                        {"prefill_grid", sched_->grid()},
                        {"chat_template", geist_chat_template_source(tmpl_)},
                        {"build_info", std::string("geist ") + geist_version()}});
  });
  h.Get("/models", models);
  for (const char* p : {"/v1/completions", "/completions"}) {
    h.Post(p, [this](const httplib::Request& req, httplib::Response& res) {
      handle_completion(*this, req, res, false);
    });
  }
  for (const char* p : {"/v1/chat/completions", "/chat/completions"}) {
    h.Post(p, [this](const httplib::Request& req, httplib::Response& res) {
      handle_completion(*this, req, res, true);
    });
  }
  h.Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
    handle_metrics(*this, req, res);
  });
  h.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    json body;
    if (auto e = parse_body(req.body, &body)) return send_error(res, *e);
    if (!body.contains("content") || !body["content"].is_string()) {
      return send_error(res, bad_param("content", "'content' must be a string"));
    }
    bool add_special = false, with_pieces = false;
    if (body.contains("add_special") && body["add_special"].is_boolean())
      add_special = body["add_special"];
    if (body.contains("with_pieces") && body["with_pieces"].is_boolean())
      with_pieces = body["with_pieces"];
    std::vector<geist_token> toks;
    ApiError e;
    if (!tokenize(body["content"].get<std::string>(), add_special, &toks, &e))
      return send_error(res, e);
    json arr = json::array();
    for (geist_token t : toks) {
      if (with_pieces) {
        arr.push_back(json{{"id", t}, {"piece", piece(t)}});
      } else {
        arr.push_back(t);
      }
    }
    send_json(res, json{{"tokens", arr}});
  });
  h.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
    json body;
    if (auto e = parse_body(req.body, &body)) return send_error(res, *e);
    if (!body.contains("tokens") || !body["tokens"].is_array()) {
      return send_error(res, bad_param("tokens", "'tokens' must be an array of token ids"));
    }
    std::vector<geist_token> toks;
    const int32_t nv = geist_model_n_vocab(model_);
    for (const json& t : body["tokens"]) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= nv) {
        return send_error(
            res, bad_param("tokens", "'tokens' must hold ids in [0, " + std::to_string(nv) + ")"));
      }
      toks.push_back(t.get<geist_token>());
    }
    size_t n = 0;
    std::string out;
    geist_status st = geist_detokenize(model_, toks.data(), toks.size(), nullptr, 0, &n);
    if (st == GEIST_E_INVALID_ARG && n > 0) {
      out.assign(n, '\0');
      st = geist_detokenize(model_, toks.data(), toks.size(), out.data(), out.size(), &n);
    }
    out.resize(st == GEIST_OK ? n : 0);
    send_json(res, json{{"content", out}});
  });
  register_session_routes(*this, h);
  register_chat_page(h);
  h.Post("/apply-template", [this](const httplib::Request& req, httplib::Response& res) {
    json body;
    if (auto e = parse_body(req.body, &body)) return send_error(res, *e);
    std::string prompt;
    ApiError e;
    if (!render_chat(body, true, &prompt, &e)) return send_error(res, e);
    send_json(res, json{{"prompt", prompt}});
  });
}

}  // namespace geist_server
