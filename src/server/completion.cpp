// POST /v1/completions and /v1/chat/completions: request -> scheduler -> OpenAI responses,
// streamed as SSE or whole.
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <deque>
#include <mutex>

#include "server/openai_params.h"
#include "server/peer_watch.h"
#include "server/server.h"

namespace geist_server {

namespace {

using geist_serving::Result;
using geist_serving::TokenEvent;

// One generation's bridge between the scheduler's worker (producer) and the HTTP thread.
struct Gen {
  std::mutex mu;
  std::condition_variable cv;
  struct Event {
    json deltas = json::array();    // parser deltas that became final
    json logprobs = json::array();  // chat-format logprob entries of the tokens behind them
  };
  std::deque<Event> events;
  bool done = false;
  Result res;
  json message;                       // chat: the whole assistant message
  std::vector<uint8_t> prompt_state;  // sessions: the state once the prompt was in
  bool saw_tool_call = false;
  geist_chat_parser* parser = nullptr;
  ~Gen() { geist_chat_parser_free(parser); }
};

json token_logprob_entry(Server& s, const TokenEvent& ev) {
  auto entry = [&](geist_token t, float lp) {
    const std::string p = s.piece(t);
    json bytes = json::array();
    for (unsigned char c : p) bytes.push_back(static_cast<int>(c));
    return json{{"token", p}, {"logprob", lp}, {"bytes", bytes}};
  };
  json e = entry(ev.token, ev.logprob);
  json top = json::array();
  for (const auto& t : ev.top) top.push_back(entry(t.token, t.logprob));
  e["top_logprobs"] = top;
  return e;
}

json usage_json(const Result& r) {
  return json{{"prompt_tokens", r.prompt_tokens},
              {"completion_tokens", r.completion_tokens},
              {"total_tokens", r.prompt_tokens + r.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", r.cached_tokens}}}};
}

json timings_json(const Result& r) {
  const int32_t pn = r.prompt_tokens - r.cached_tokens;
  auto per = [](double ms, int32_t n) { return n > 0 ? ms / n : 0.0; };
  auto rate = [](double ms, int32_t n) { return ms > 0 ? 1e3 * n / ms : 0.0; };
  return json{{"cache_n", r.cached_tokens},
              {"prompt_n", pn},
              {"prompt_ms", r.prompt_ms},
              {"cache_restore_ms", r.restore_ms},
              {"checkpoint_ms", r.checkpoint_ms},
              {"prompt_per_token_ms", per(r.prompt_ms, pn)},
              {"prompt_per_second", rate(r.prompt_ms, pn)},
              {"predicted_n", r.completion_tokens},
              {"predicted_ms", r.predicted_ms},
              {"predicted_per_token_ms", per(r.predicted_ms, r.completion_tokens)},
              {"predicted_per_second", rate(r.predicted_ms, r.completion_tokens)}};
}

// Completions logprobs ({tokens, token_logprobs, top_logprobs, text_offset}) from chat entries.
json legacy_logprobs(const json& entries) {
  json toks = json::array(), lps = json::array(), tops = json::array(), offs = json::array();
  size_t off = 0;
  for (const json& e : entries) {
    toks.push_back(e["token"]);
    lps.push_back(e["logprob"]);
    json t = json::object();
    for (const json& x : e["top_logprobs"]) t[x["token"].get<std::string>()] = x["logprob"];
    tops.push_back(t);
    offs.push_back(off);
    off += e["bytes"].size();
  }
  return json{
      {"tokens", toks}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offs}};
}

std::string finish_reason(const Gen& g) {
  if (g.res.finish_reason == "stop" && g.saw_tool_call) return "tool_calls";
  return g.res.finish_reason;
}

void log_request(Server& s, const std::string& id, const char* path, int status, const Result& r) {
  const double tps = r.predicted_ms > 0 ? 1e3 * r.completion_tokens / r.predicted_ms : 0.0;
  std::fprintf(stderr,
               "geist serve: %s %s status=%d prompt=%d cached=%d generated=%d ttft_ms=%.1f "
               "tok_s=%.1f finish=%s\n",
               id.c_str(), path, status, r.prompt_tokens, r.cached_tokens, r.completion_tokens,
               r.ttft_ms, tps, r.finish_reason.c_str());
}

}  // namespace

void handle_completion(Server& s, const httplib::Request& hreq, httplib::Response& res, bool chat,
                       std::shared_ptr<ChatSession> sess) {
  json body;
  if (auto e = parse_body(hreq.body, &body)) return send_error(res, *e);
  // A session's turn: its conversation first, then the request's new messages.
  json all_messages;
  std::vector<geist_token> sess_tokens;
  std::string sess_text;
  bool sess_text_known = true;
  geist_cache::Image sess_image;
  if (sess) {
    if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty()) {
      return send_error(res, bad_param("messages",
                                       "'messages' must be a non-empty array of the "
                                       "turn's new messages"));
    }
    std::lock_guard<std::mutex> lock(sess->mu);
    if (sess->busy) {
      ApiError e;
      e.status = 409;
      e.code = "session_busy";
      e.message = "the session is answering another request";
      return send_error(res, e);
    }
    ApiError park_err;
    if (!session_resident(s, *sess, &park_err)) return send_error(res, park_err);
    sess->last_use_ms = geist_serving::now_ms();
    all_messages = sess->messages;
    for (const json& m : body["messages"]) all_messages.push_back(m);
    sess_tokens = sess->tokens;
    sess_text = sess->text;
    sess_text_known = sess->text_known;
    sess_image = sess->image;
  }
  GenOptions opt;
  if (auto e = parse_gen_options(body, chat, &opt)) return send_error(res, *e);

  auto req = std::make_shared<geist_serving::Request>();
  std::string prompt_text;
  ApiError err;
  const geist_chat_template* parser_tmpl = nullptr;
  if (chat && sess) {
    // Continue from the session's state: its tokens, then the tokens of the text the new
    // messages add to the rendered conversation.
    json full = body;
    full["messages"] = all_messages;
    std::string suffix;
    if (!s.render_chat(full, true, &prompt_text, &err)) return send_error(res, err);
    if (sess_text_known && prompt_text.compare(0, sess_text.size(), sess_text) == 0) {
      suffix = prompt_text.substr(sess_text.size());
    } else {
      json fresh = body;
      if (!s.render_chat(fresh, true, &suffix, &err)) return send_error(res, err);
      prompt_text = sess_text + suffix;
    }
    std::vector<geist_token> more;
    if (!s.tokenize(suffix, false, &more, &err)) return send_error(res, err);
    req->prompt = sess_tokens;
    req->prompt.insert(req->prompt.end(), more.begin(), more.end());
    req->start_image = sess_image;
    req->start_len = static_cast<int32_t>(sess_tokens.size());
    parser_tmpl = s.chat_template();
  } else if (chat) {
    if (!s.render_chat(body, true, &prompt_text, &err)) return send_error(res, err);
    if (!s.tokenize(prompt_text, true, &req->prompt, &err)) return send_error(res, err);
    parser_tmpl = s.chat_template();
    // Message ends of the rendered conversation are checkpoints: the next turn and the next
    // request with the same system prompt start from them.
    if (s.scheduler().cache() != nullptr) {  // RAM or tiers
      json partial = body;
      const size_t n_msg = body["messages"].size();
      // The first message's end (a system prompt shared across requests) and the last two
      // (where the next turn branches off): rendering every prefix of a long conversation
      // would cost more than the checkpoints save.
      for (size_t i = 1; i < n_msg; ++i) {
        if (i != 1 && i + 2 < n_msg) continue;
        partial["messages"] = json(body["messages"].begin(), body["messages"].begin() + i);
        std::string t;
        ApiError ignored;
        std::vector<geist_token> toks;
        if (!s.render_chat(partial, false, &t, &ignored) ||
            prompt_text.compare(0, t.size(), t) != 0 || !s.tokenize(t, true, &toks, &ignored) ||
            toks.size() > req->prompt.size() ||
            !std::equal(toks.begin(), toks.end(), req->prompt.begin())) {
          continue;
        }
        req->checkpoints.push_back(static_cast<int32_t>(toks.size()));
      }
    }
  } else {
    PromptInput pin;
    if (auto e = parse_prompt(body, geist_model_n_vocab(s.model()), &pin))
      return send_error(res, *e);
    if (pin.is_text) {
      prompt_text = pin.text;
      if (!s.tokenize(prompt_text, true, &req->prompt, &err)) return send_error(res, err);
      // A text prompt may end inside a word or on a space that a longer text tokenizes
      // differently (SentencePiece joins a trailing space to the next word), so an extension
      // would not find this prompt's end state: a checkpoint at its last multiple of 64 does.
      // (The scheduler puts one at the last grid point of every prompt; on a grid of 1 that is
      // the end itself, exact for token ids and chat, whose prompts end on a template's
      // boundary that the next turn repeats.)
      if (s.scheduler().cache() != nullptr) {
        const int32_t n = static_cast<int32_t>(req->prompt.size());
        req->checkpoints.push_back(n / geist_serving::kGrid * geist_serving::kGrid);
      }
    } else {
      req->prompt = std::move(pin.ids);
    }
  }
  if (req->prompt.empty()) {
    const geist_token bos = geist_model_token_bos(s.model());
    if (bos < 0)
      return send_error(res, bad_param(chat ? "messages" : "prompt", "the prompt is empty"));
    req->prompt.push_back(bos);
  }
  const int32_t n_ctx = s.scheduler().n_ctx();
  const int32_t n_prompt = static_cast<int32_t>(req->prompt.size());
  if (n_prompt >= n_ctx) {
    ApiError e;
    e.type = "exceed_context_size_error";
    e.code = "context_length_exceeded";
    e.param = chat ? "messages" : "prompt";
    e.message = "the request has " + std::to_string(n_prompt) +
                " prompt tokens, more than the context of " + std::to_string(n_ctx) +
                " tokens leaves room for (at least one generated token)";
    e.extra = json{{"n_prompt_tokens", n_prompt}, {"n_ctx", n_ctx}};
    return send_error(res, e);
  }

  auto g = std::make_shared<Gen>();
  {
    const std::string ps = dump(parser_options(body, chat, opt));
    char ebuf[512] = {};
    if (geist_chat_parser_create(parser_tmpl, chat ? prompt_text.data() : nullptr,
                                 chat ? prompt_text.size() : 0, ps.data(), ps.size(), &g->parser,
                                 ebuf, sizeof ebuf) != GEIST_OK) {
      return send_error(res,
                        bad_param("stop", std::string("cannot set up the output parser: ") + ebuf));
    }
  }
  req->sampler = opt.sampler;
  req->max_tokens = opt.max_tokens;
  req->logprobs = opt.logprobs;
  req->top_logprobs = opt.top_logprobs;
  req->cache_namespace = opt.cache_salt;
  Server* sp = &s;
  const std::string id = s.next_id(chat ? "chatcmpl-" : "cmpl-");
  const std::string path = hreq.path;
  req->on_token = [sp, g](const TokenEvent& ev) {
    const std::string p = sp->piece(ev.token);
    const char* out = nullptr;
    int stopped = 0;
    Gen::Event e;
    if (geist_chat_parser_feed(g->parser, p.data(), p.size(), &out, &stopped) == GEIST_OK && out) {
      e.deltas = json::parse(out, nullptr, false);
      if (!e.deltas.is_array()) e.deltas = json::array();
    }
    if (!ev.top.empty() || ev.logprob != 0.0f) e.logprobs.push_back(token_logprob_entry(*sp, ev));
    {
      std::lock_guard<std::mutex> lock(g->mu);
      for (const json& d : e.deltas)
        g->saw_tool_call = g->saw_tool_call || d.contains("tool_calls");
      g->events.push_back(std::move(e));
    }
    g->cv.notify_all();
    return stopped == 0;
  };
  if (sess) {
    req->on_prompt_state = [g](std::vector<uint8_t> img) { g->prompt_state = std::move(img); };
    std::lock_guard<std::mutex> lock(sess->mu);
    if (sess->busy) {
      ApiError e;
      e.status = 409;
      e.code = "session_busy";
      e.message = "the session is answering another request";
      return send_error(res, e);
    }
    sess->busy = true;
  }
  const std::vector<geist_token> prompt_copy = sess ? req->prompt : std::vector<geist_token>{};
  req->on_done = [g, sp, id, path, sess, all_messages, prompt_text, prompt_copy](const Result& r) {
    if (r.finish_reason == "cancelled") log_request(*sp, id, path.c_str(), 499, r);
    const char* deltas = nullptr;
    const char* message = nullptr;
    Gen::Event e;
    json msg;
    if (geist_chat_parser_finish(g->parser, &deltas, &message) == GEIST_OK) {
      e.deltas = json::parse(deltas ? deltas : "[]", nullptr, false);
      if (!e.deltas.is_array()) e.deltas = json::array();
      msg = json::parse(message ? message : "{}", nullptr, false);
    }
    {
      std::lock_guard<std::mutex> lock(g->mu);
      for (const json& d : e.deltas)
        g->saw_tool_call = g->saw_tool_call || d.contains("tool_calls");
      g->events.push_back(std::move(e));
      g->message = msg.is_object() ? msg : json{{"role", "assistant"}, {"content", ""}};
      g->res = r;
      g->done = true;
    }
    if (sess) {  // a finished turn becomes the session's conversation and state
      std::lock_guard<std::mutex> lock(sess->mu);
      sess->busy = false;
      if ((r.finish_reason == "stop" || r.finish_reason == "length") && !g->prompt_state.empty()) {
        sess->messages = all_messages;
        sess->messages.push_back(g->message);
        sess->text = prompt_text;
        sess->text_known = true;
        sess->tokens = prompt_copy;
        sess->image = std::make_shared<const std::vector<uint8_t>>(std::move(g->prompt_state));
        sess->image_bytes = sess->image->size();
        sess->park_wait = 0;
      }
      sess->last_use_ms = geist_serving::now_ms();
    }
    g->cv.notify_all();
  };
  if (!s.scheduler().submit(req)) {
    if (sess) {
      std::lock_guard<std::mutex> lock(sess->mu);
      sess->busy = false;
    }
    ++s.rejected_queue_full;
    ApiError e;
    e.status = 503;
    e.type = "unavailable_error";
    e.code = "queue_full";
    e.message = "the server is busy (the request queue is full): retry later";
    res.set_header("Retry-After", "1");
    return send_error(res, e);
  }

  const int64_t created = static_cast<int64_t>(std::time(nullptr));
  const std::string model = s.cfg().alias;

  if (!opt.stream) {
    // The client may go away while the answer is computed: polled every kWatchMs, a closed
    // connection cancels the request (the scheduler drops it before its next step).
    constexpr int kWatchMs = 20;
    const PeerWatch peer(hreq.local_addr, hreq.local_port, hreq.remote_addr, hreq.remote_port);
    std::unique_lock<std::mutex> lock(g->mu);
    while (!g->done) {
      g->cv.wait_for(lock, std::chrono::milliseconds(kWatchMs), [&] { return g->done; });
      if (!g->done && !req->cancelled && peer.gone()) req->cancelled = true;
    }
    if (g->res.finish_reason == "cancelled") {
      ApiError e;
      e.status = 499;  // nginx's "client closed request": nobody reads it
      e.message = "the client closed the connection";
      return send_error(res, e);
    }
    if (g->res.finish_reason == "error") {
      ApiError e;
      e.status = 500;
      e.type = "server_error";
      e.message = "generation failed: " + g->res.error;
      log_request(s, id, path.c_str(), 500, g->res);
      return send_error(res, e);
    }
    json lps = json::array();
    std::string text;
    for (const auto& ev : g->events) {
      for (const json& l : ev.logprobs) lps.push_back(l);
      for (const json& d : ev.deltas) {
        if (d.contains("content")) text += d["content"].get<std::string>();
      }
    }
    json choice = {{"index", 0}};
    if (chat) {
      choice["message"] = g->message;
      choice["logprobs"] = opt.logprobs ? json{{"content", lps}} : json(nullptr);
    } else {
      choice["text"] = text;
      choice["logprobs"] = opt.logprobs ? legacy_logprobs(lps) : json(nullptr);
    }
    choice["finish_reason"] = finish_reason(*g);
    json out = {{"id", id},
                {"object", chat ? "chat.completion" : "text_completion"},
                {"created", created},
                {"model", model},
                {"system_fingerprint", std::string("geist-") + geist_version()},
                {"choices", json::array({choice})},
                {"usage", usage_json(g->res)},
                {"timings", timings_json(g->res)}};
    log_request(s, id, path.c_str(), 200, g->res);
    return send_json(res, out);
  }

  // Streaming: one SSE frame per delta; the provider waits at most 100 ms per call, writes
  // a ":" ping when idle for --ping-ms, and a failed write (client gone) cancels the request.
  struct StreamState {
    bool sent_role = false, finished = false;
    json pending_lps = json::array();
    std::chrono::steady_clock::time_point last_write = std::chrono::steady_clock::now();
  };
  auto st = std::make_shared<StreamState>();
  const bool include_usage = opt.include_usage;
  const bool want_lps = opt.logprobs;
  const int ping_ms = s.cfg().ping_ms;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [g, req, st, id, created, model, chat, include_usage, want_lps, sp, path, ping_ms](
          size_t, httplib::DataSink& sink) -> bool {
        const int poll_ms = std::min(100, ping_ms);
        auto frame = [&](const json& choice_or_null, const json* usage) {
          json c = {{"id", id},
                    {"object", chat ? "chat.completion.chunk" : "text_completion"},
                    {"created", created},
                    {"model", model},
                    {"system_fingerprint", std::string("geist-") + geist_version()}};
          c["choices"] = choice_or_null.is_null() ? json::array() : json::array({choice_or_null});
          if (include_usage) c["usage"] = usage ? *usage : json(nullptr);
          const std::string text = "data: " + dump(c) + "\n\n";
          st->last_write = std::chrono::steady_clock::now();
          return sink.write(text.data(), text.size());
        };
        auto choice = [&](json delta, const json& finish) {
          json ch = {{"index", 0}};
          if (chat) {
            ch["delta"] = std::move(delta);
          } else {
            ch["text"] = delta.contains("content") ? delta["content"] : json("");
          }
          if (want_lps && !st->pending_lps.empty()) {
            ch["logprobs"] =
                chat ? json{{"content", st->pending_lps}} : legacy_logprobs(st->pending_lps);
            st->pending_lps = json::array();
          } else {
            ch["logprobs"] = nullptr;
          }
          ch["finish_reason"] = finish;
          return ch;
        };
        std::deque<Gen::Event> evs;
        bool done = false;
        {
          std::unique_lock<std::mutex> lock(g->mu);
          g->cv.wait_for(lock, std::chrono::milliseconds(poll_ms),
                         [&] { return g->done || !g->events.empty(); });
          evs.swap(g->events);
          done = g->done;
        }
        bool ok = true;
        if (chat && !st->sent_role) {
          st->sent_role = true;
          ok = frame(choice(json{{"role", "assistant"}, {"content", ""}}, nullptr), nullptr);
        }
        for (auto& ev : evs) {
          for (const json& l : ev.logprobs) st->pending_lps.push_back(l);
          for (const json& d : ev.deltas) {
            if (!ok) break;
            json delta = json::object();
            if (d.contains("content")) {
              delta["content"] = d["content"];
            } else if (d.contains("reasoning_content")) {
              if (!chat) continue;
              delta["reasoning_content"] = d["reasoning_content"];
            } else if (d.contains("tool_calls")) {
              if (!chat) continue;
              delta["tool_calls"] = d["tool_calls"];  // already OpenAI's delta shape
            } else {
              continue;
            }
            ok = frame(choice(delta, nullptr), nullptr);
          }
        }
        if (ok && done) {
          Result r;
          std::string fr;
          {
            std::lock_guard<std::mutex> lock(g->mu);
            r = g->res;
            fr = finish_reason(*g);
          }
          if (r.finish_reason == "error") {
            ApiError e;
            e.status = 500;
            e.type = "server_error";
            e.message = "generation failed: " + r.error;
            const std::string t = "data: " + dump(error_json(e)) + "\n\n";
            ok = sink.write(t.data(), t.size());
          } else if (r.finish_reason != "cancelled") {
            json last = choice(chat ? json::object() : json{{"content", ""}}, fr);
            json c = {{"id", id},
                      {"object", chat ? "chat.completion.chunk" : "text_completion"},
                      {"created", created},
                      {"model", model},
                      {"system_fingerprint", std::string("geist-") + geist_version()},
                      {"choices", json::array({last})}};
            // Without include_usage the last chunk still carries usage, as llama-server's does.
            c["usage"] = include_usage ? json(nullptr) : usage_json(r);
            c["timings"] = timings_json(r);
            std::string t = "data: " + dump(c) + "\n\n";
            if (include_usage) {
              json u = {{"id", id},
                        {"object", chat ? "chat.completion.chunk" : "text_completion"},
                        {"created", created},
                        {"model", model},
                        {"system_fingerprint", std::string("geist-") + geist_version()},
                        {"choices", json::array()},
                        {"usage", usage_json(r)}};
              t += "data: " + dump(u) + "\n\n";
            }
            t += "data: [DONE]\n\n";
            ok = sink.write(t.data(), t.size());
          }
          log_request(*sp, id, path.c_str(), 200, r);
          st->finished = true;
          if (ok) sink.done();
          return ok;
        }
        if (ok && std::chrono::steady_clock::now() - st->last_write >
                      std::chrono::milliseconds(ping_ms)) {
          st->last_write = std::chrono::steady_clock::now();
          ok = sink.write(": ping\n\n", 8);
        }
        if (!ok) req->cancelled = true;
        return ok;
      },
      [req, st](bool success) {
        if (!success || !st->finished) req->cancelled = true;  // the client went away
      });
}

}  // namespace geist_server
