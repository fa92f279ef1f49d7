// libFuzzer entry point for the server's request parsing (src/server/openai_params.cpp): any
// input, taken as the body of POST /v1/chat/completions, /v1/completions or a session
// endpoint, goes through the same functions the handlers call: JSON parsing, the sampler and
// generation fields, the completions prompt, the chat render request (rendered with ChatML
// and, when the fixtures are there, Qwen3.5's template), the output parser's options (fed a
// fixed stream), the session id. Never a crash, leak or UB; every refusal is a well-formed
// OpenAI error (status 4xx, a message, a type, param/code null or a string) that survives
// the wire; everything accepted is something the engine accepts (sampler params it
// validates, token ids in the vocabulary).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "chat/chat.h"
#include "engine/sampler.h"
#include "geist/geist_chat.h"
#include "server/openai_params.h"

namespace {

using geist_server::ApiError;
using geist_server::json;

constexpr int32_t kVocab = 512;

[[noreturn]] void fail(const char* why) {
  std::fprintf(stderr, "fuzz_openai: %s\n", why);
  std::abort();
}

// What a handler sends for `e` must be an OpenAI error a client can parse.
void check_error(const ApiError& e) {
  if (e.status < 400 || e.status > 599) fail("error status outside 4xx/5xx");
  if (e.message.empty() || e.type.empty()) fail("error without a message or type");
  const std::string wire = geist_server::dump(geist_server::error_json(e));
  const json j = json::parse(wire, nullptr, false);
  if (!j.is_object() || !j.contains("error") || !j["error"].is_object()) fail("error not JSON");
  const json& err = j["error"];
  if (!err["message"].is_string() || !err["type"].is_string()) fail("error fields");
  if (!(err["param"].is_null() || err["param"].is_string())) fail("error param");
  if (!(err["code"].is_null() || err["code"].is_string())) fail("error code");
}

struct Templates {
  geist_chat_template* chatml = nullptr;
  geist_chat_template* qwen = nullptr;  // from the fixtures, when present
  Templates() {
    const std::string_view src = geist::chat::chatml_template_source();
    char err[256] = {};
    if (geist_chat_template_create(src.data(), src.size(), "<s>", "</s>", &chatml, err,
                                   sizeof err) != GEIST_OK) {
      fail("cannot create the ChatML template");
    }
    const char* fx = std::getenv("GEIST_FIXTURES");
    const std::string path = std::string(fx ? fx : GEIST_SOURCE_DIR "/../shared/fixtures") +
                             "/templates/Qwen3.5-4B.jinja";
    std::ifstream f(path, std::ios::binary);
    if (f) {
      std::stringstream ss;
      ss << f.rdbuf();
      const std::string q = ss.str();
      if (geist_chat_template_create(q.data(), q.size(), "", "<|im_end|>", &qwen, err,
                                     sizeof err) != GEIST_OK) {
        fail("cannot create the Qwen3.5 template");
      }
    }
  }
  ~Templates() {
    geist_chat_template_free(chatml);
    geist_chat_template_free(qwen);
  }
};

// Renders as Server::render_chat does; a refusal carries the template's message.
bool render(geist_chat_template* t, const json& req, std::string* out) {
  const std::string r = geist_server::dump(req);
  size_t n = 0;
  geist_status st = geist_chat_render(t, r.data(), r.size(), nullptr, 0, &n);
  if (st == GEIST_E_INVALID_ARG && n > 0) {
    out->assign(n, '\0');
    st = geist_chat_render(t, r.data(), r.size(), out->data(), out->size(), &n);
  } else if (st == GEIST_OK) {
    out->clear();
  }
  if (st != GEIST_OK) {
    if (geist_chat_template_last_error(t)[0] == '\0') fail("render refused without a message");
    return false;
  }
  out->resize(n);
  return true;
}

void check_options(const json& body, bool chat, geist_chat_template* t, const std::string& prompt) {
  geist_server::GenOptions o;
  if (auto e = geist_server::parse_gen_options(body, chat, &o)) return check_error(*e);
  if (!geist::validate_sampler_params(o.sampler).is_ok())
    fail("accepted a sampler the engine refuses");
  if (o.max_tokens < -1 || o.top_logprobs < 0 || o.top_logprobs > 20) fail("limits");
  if (o.stop.size() > 16) fail("too many stop strings");
  for (const std::string& s : o.stop) {
    if (s.empty()) fail("empty stop string");
  }
  // The output parser, as the handler sets it up, on a fixed stream.
  const std::string ps = geist_server::dump(geist_server::parser_options(body, chat, o));
  geist_chat_parser* parser = nullptr;
  char err[256] = {};
  if (geist_chat_parser_create(chat ? t : nullptr, chat ? prompt.data() : nullptr,
                               chat ? prompt.size() : 0, ps.data(), ps.size(), &parser, err,
                               sizeof err) != GEIST_OK) {
    if (err[0] == '\0') fail("parser refused without a message");
    return;
  }
  static const char* const kPieces[] = {"<think>",
                                        "hm",
                                        "</think>",
                                        "Hi",
                                        " the",
                                        "<tool_call>",
                                        "{\"name\": \"f\", \"arguments\": {}}",
                                        "</tool_call>",
                                        "\xe6\x97",
                                        "\xa5",
                                        "END"};
  int stopped = 0;
  for (const char* p : kPieces) {
    const char* out = nullptr;
    if (geist_chat_parser_feed(parser, p, std::strlen(p), &out, &stopped) != GEIST_OK) break;
    if (out && json::parse(out, nullptr, false).is_discarded()) fail("parser deltas not JSON");
    if (stopped) break;
  }
  const char* deltas = nullptr;
  const char* message = nullptr;
  if (geist_chat_parser_finish(parser, &deltas, &message) == GEIST_OK) {
    if (message && !json::parse(message, nullptr, false).is_object()) fail("message not JSON");
  }
  geist_chat_parser_free(parser);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Templates templates;
  const std::string text(reinterpret_cast<const char*>(data), size);
  json body;
  if (auto e = geist_server::parse_body(text, &body)) {
    check_error(*e);
    return 0;
  }
  // /v1/completions
  geist_server::PromptInput prompt;
  if (auto e = geist_server::parse_prompt(body, kVocab, &prompt)) {
    check_error(*e);
  } else {
    for (geist_token t : prompt.ids) {
      if (t < 0 || t >= kVocab) fail("accepted a token id outside the vocabulary");
    }
  }
  check_options(body, false, nullptr, std::string());
  // /v1/chat/completions (and the session endpoints' conversations)
  for (bool gen_prompt : {true, false}) {
    json req;
    if (auto e = geist_server::chat_render_request(body, gen_prompt, &req)) {
      check_error(*e);
      continue;
    }
    for (geist_chat_template* t : {templates.chatml, templates.qwen}) {
      if (t == nullptr) continue;
      std::string rendered;
      if (render(t, req, &rendered) && gen_prompt) check_options(body, true, t, rendered);
    }
  }
  // POST /v1/sessions, /v1/sessions/ID/fork
  std::string id = "default";
  if (auto e = geist_server::parse_session_id(body, &id)) {
    check_error(*e);
  } else if (!geist_server::valid_session_id(id)) {
    fail("accepted an invalid session id");
  }
  return 0;
}
