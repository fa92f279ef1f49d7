#include "server/sessions.h"

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>

#include "geist/geist_snapshot.h"
#include "geist/geist_util.h"
#include "server/openai_params.h"
#include "server/server.h"

namespace geist_server {

std::shared_ptr<ChatSession> SessionStore::get(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(id);
  return it == map_.end() ? nullptr : it->second;
}

bool SessionStore::put_new(const std::string& id, std::shared_ptr<ChatSession> s,
                           std::string* why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (map_.count(id) != 0) {
    *why = "a session named '" + id + "' exists";
    return false;
  }
  if (map_.size() >= kMaxSessions) {
    *why = "the server holds the most sessions it may (" + std::to_string(kMaxSessions) + ")";
    return false;
  }
  map_.emplace(id, std::move(s));
  return true;
}

bool SessionStore::erase(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  return map_.erase(id) != 0;
}

std::vector<std::string> SessionStore::ids() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [k, v] : map_) out.push_back(k);
  return out;
}

namespace {

json describe(const std::string& id, ChatSession& s) {
  std::lock_guard<std::mutex> lock(s.mu);
  return json{{"id", id},
              {"object", "session"},
              {"messages", s.text_known ? s.messages : json(nullptr)},
              {"n_tokens", s.tokens.size()},
              {"state_bytes", s.image ? s.image->size() : s.image_bytes},
              {"parked", s.parked}};
}

ApiError not_found(const std::string& id) {
  ApiError e;
  e.status = 404;
  e.type = "not_found_error";
  e.param = "session";
  e.message = "no session named '" + id + "'";
  return e;
}

}  // namespace

bool prefill_state(Server& s, const std::vector<geist_token>& tokens, std::vector<uint8_t>* out,
                   ApiError* err) {
  auto req = std::make_shared<geist_serving::Request>();
  req->prompt = tokens;
  geist_sampler_params_default(&req->sampler);
  req->prefill_only = true;
  struct Wait {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    geist_serving::Result res;
    std::vector<uint8_t> img;
  };
  auto w = std::make_shared<Wait>();
  req->on_token = [](const geist_serving::TokenEvent&) { return false; };
  req->on_prompt_state = [w](std::vector<uint8_t> img) { w->img = std::move(img); };
  req->on_done = [w](const geist_serving::Result& r) {
    std::lock_guard<std::mutex> lock(w->mu);
    w->res = r;
    w->done = true;
    w->cv.notify_all();
  };
  if (!s.scheduler().submit(req)) {
    err->status = 503;
    err->type = "unavailable_error";
    err->code = "queue_full";
    err->message = "the server is busy (the request queue is full): retry later";
    return false;
  }
  std::unique_lock<std::mutex> lock(w->mu);
  w->cv.wait(lock, [&] { return w->done; });
  if (w->img.empty()) {
    err->status = 500;
    err->type = "server_error";
    err->message = "could not compute the session's state: " + w->res.error;
    return false;
  }
  *out = std::move(w->img);
  return true;
}

void register_session_routes(Server& s, httplib::Server& h) {
  Server* sp = &s;
  h.Post("/v1/sessions", [sp](const httplib::Request& req, httplib::Response& res) {
    json body;
    if (auto e = parse_body(req.body, &body)) return send_error(res, *e);
    std::string id = sp->next_id("sess-");
    if (auto e = parse_session_id(body, &id)) return send_error(res, *e);
    auto sess = std::make_shared<ChatSession>();
    ApiError err;
    std::string text;
    if (!sp->render_chat(body, false, &text, &err)) return send_error(res, err);
    std::vector<geist_token> toks;
    if (!sp->tokenize(text, true, &toks, &err)) return send_error(res, err);
    if (static_cast<int32_t>(toks.size()) >= sp->scheduler().n_ctx()) {
      return send_error(res, bad_param("messages", "the conversation does not fit the context"));
    }
    std::vector<uint8_t> img;
    if (!prefill_state(*sp, toks, &img, &err)) return send_error(res, err);
    sess->messages = body["messages"];
    sess->text = text;
    sess->tokens = toks;
    sess->image = std::make_shared<const std::vector<uint8_t>>(std::move(img));
    sess->image_bytes = sess->image->size();
    sess->last_use_ms = geist_serving::now_ms();
    std::string why;
    if (!sp->sessions.put_new(id, sess, &why)) {
      ApiError e = bad_param("id", why);
      e.status = 409;
      return send_error(res, e);
    }
    send_json(res, describe(id, *sess), 201);
  });
  h.Get("/v1/sessions", [sp](const httplib::Request&, httplib::Response& res) {
    json data = json::array();
    for (const std::string& id : sp->sessions.ids()) {
      if (auto ss = sp->sessions.get(id)) data.push_back(describe(id, *ss));
    }
    send_json(res, json{{"object", "list"}, {"data", data}});
  });
  h.Get(R"(/v1/sessions/([A-Za-z0-9._-]+))",
        [sp](const httplib::Request& req, httplib::Response& res) {
          const std::string id = req.matches[1];
          auto ss = find_session(*sp, id);
          if (!ss) return send_error(res, not_found(id));
          send_json(res, describe(id, *ss));
        });
  h.Delete(R"(/v1/sessions/([A-Za-z0-9._-]+))",
           [sp](const httplib::Request& req, httplib::Response& res) {
             const std::string id = req.matches[1];
             const bool known = find_session(*sp, id) != nullptr;  // in RAM or a tier
             sp->sessions.erase(id);
             if (auto* cache = sp->scheduler().cache())
               cache->erase_record(session_record(*sp, id));
             if (!known) return send_error(res, not_found(id));
             send_json(res, json{{"id", id}, {"object", "session"}, {"deleted", true}});
           });
  h.Post(R"(/v1/sessions/([A-Za-z0-9._-]+)/fork)",
         [sp](const httplib::Request& req, httplib::Response& res) {
           const std::string id = req.matches[1];
           auto ss = find_session(*sp, id);
           if (!ss) return send_error(res, not_found(id));
           json body = json::object();
           if (!req.body.empty()) {
             if (auto e = parse_body(req.body, &body)) return send_error(res, *e);
           }
           std::string nid = sp->next_id("sess-");
           if (auto e = parse_session_id(body, &nid)) return send_error(res, *e);
           auto copy = std::make_shared<ChatSession>();
           {
             std::lock_guard<std::mutex> lock(ss->mu);
             copy->messages = ss->messages;
             copy->text_known = ss->text_known;
             copy->text = ss->text;
             copy->tokens = ss->tokens;
             copy->image = ss->image;  // images are immutable: shared
             copy->image_bytes = ss->image_bytes;
             copy->parked = ss->parked;  // the same tokens: the same object in the tiers
             copy->last_use_ms = ss->last_use_ms = geist_serving::now_ms();
           }
           std::string why;
           if (!sp->sessions.put_new(nid, copy, &why)) {
             ApiError e = bad_param("id", why);
             e.status = 409;
             return send_error(res, e);
           }
           send_json(res, describe(nid, *copy), 201);
         });
  h.Get(R"(/v1/sessions/([A-Za-z0-9._-]+)/state)",
        [sp](const httplib::Request& req, httplib::Response& res) {
          const std::string id = req.matches[1];
          auto ss = find_session(*sp, id);
          if (!ss) return send_error(res, not_found(id));
          geist_cache::Image img;
          {
            std::lock_guard<std::mutex> lock(ss->mu);
            ApiError err;
            if (!session_resident(*sp, *ss, &err)) return send_error(res, err);
            ss->last_use_ms = geist_serving::now_ms();
            img = ss->image;
          }
          res.set_content(std::string(img->begin(), img->end()), "application/octet-stream");
        });
  h.Put(R"(/v1/sessions/([A-Za-z0-9._-]+)/state)",
        [sp](const httplib::Request& req, httplib::Response& res) {
          const std::string id = req.matches[1];
          // Validated by restoring it into a scratch session of the served shape first: a refused
          // image is a 400 and changes nothing.
          geist_session_params p;
          geist_session_params_default(&p);
          p.max_seq_len = sp->scheduler().n_ctx();
          p.kv_mode = sp->cfg().sched.kv_mode;
          p.n_threads = 1;
          geist_session* scratch = nullptr;
          if (geist_session_create(sp->model(), &p, &scratch) != GEIST_OK) {
            ApiError e;
            e.status = 500;
            e.type = "server_error";
            e.message = std::string("cannot create a scratch session: ") +
                        geist_model_last_error(sp->model());
            return send_error(res, e);
          }
          const geist_status st = geist_session_restore(scratch, req.body.data(), req.body.size());
          std::vector<geist_token> toks;
          if (st == GEIST_OK) {
            const geist_token* t = nullptr;
            size_t n = 0;
            if (geist_session_tokens(scratch, &t, &n) == GEIST_OK) toks.assign(t, t + n);
          }
          const std::string why = st == GEIST_OK ? "" : geist_session_last_error(scratch);
          geist_session_destroy(scratch);
          if (st != GEIST_OK) {
            ApiError e = bad_param("state", "the image was refused: " + why);
            e.code = "invalid_state_image";
            return send_error(res, e);
          }
          auto img = std::make_shared<const std::vector<uint8_t>>(req.body.begin(), req.body.end());
          auto ss = sp->sessions.get(id);
          bool created = false;
          if (!ss) {
            ss = std::make_shared<ChatSession>();
            std::string w;
            if (!sp->sessions.put_new(id, ss, &w)) {
              ss = sp->sessions.get(id);
              if (!ss) return send_error(res, bad_param("id", w));
            } else {
              created = true;
            }
          }
          {
            std::lock_guard<std::mutex> lock(ss->mu);
            if (ss->busy) {
              ApiError e;
              e.status = 409;
              e.code = "session_busy";
              e.message = "the session is answering another request";
              return send_error(res, e);
            }
            if (toks != ss->tokens) {  // another conversation: its messages are not known
              ss->messages = json::array();
              ss->text_known = false;
              ss->text.clear();
            }
            ss->tokens = toks;
            ss->image = img;
            ss->image_bytes = img->size();
            ss->parked = false;
            ss->park_wait = 0;
            ss->last_use_ms = geist_serving::now_ms();
          }
          send_json(res, describe(id, *ss), created ? 201 : 200);
        });
  h.Post(R"(/v1/sessions/([A-Za-z0-9._-]+)/chat/completions)",
         [sp](const httplib::Request& req, httplib::Response& res) {
           const std::string id = req.matches[1];
           auto ss = find_session(*sp, id);
           if (!ss) return send_error(res, not_found(id));
           handle_completion(*sp, req, res, true, ss);
         });
}

}  // namespace geist_server
