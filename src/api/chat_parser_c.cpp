// The chat C ABI's output side (geist_chat.h): stop strings, then reasoning and tool calls.
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/handles.h"
#include "chat/chat_format.h"
#include "chat/chat_parse.h"
#include "chat/chat_parse_json.h"
#include "chat/stop.h"
#include "geist/geist_chat.h"

namespace {

using geist::Status;
using geist::chat::ChatDelta;
using geist::chat::Json;

}  // namespace

struct geist_chat_parser {
  std::optional<geist::chat::StopMatcher> stop;  // empty: no stop strings
  std::unique_ptr<geist::chat::ChatParser> parser;
  bool finished = false;
  std::string deltas_json;   // what feed / finish hand out
  std::string message_json;  // the final message (after finish)
};

namespace {

void write_err(char* err_buf, size_t err_cap, const std::string& msg) noexcept {
  if (err_buf == nullptr || err_cap == 0) return;
  const size_t n = msg.size() < err_cap - 1 ? msg.size() : err_cap - 1;
  std::memcpy(err_buf, msg.data(), n);
  err_buf[n] = '\0';
}

Status read_stops(const Json& v, std::vector<std::string>* out) {
  if (v.is_null()) return Status::ok();
  if (v.is_string()) {
    out->push_back(v.get<std::string>());
    return Status::ok();
  }
  if (!v.is_array()) return Status(GEIST_E_INVALID_ARG, "\"stop\" must be a string or a list");
  for (const Json& s : v) {
    if (!s.is_string()) return Status(GEIST_E_INVALID_ARG, "\"stop\" entries must be strings");
    out->push_back(s.get<std::string>());
  }
  return Status::ok();
}

Status read_bool(const Json& opts, const char* key, bool* out) {
  if (!opts.contains(key) || opts[key].is_null()) return Status::ok();
  if (!opts[key].is_boolean())
    return Status::error(GEIST_E_INVALID_ARG, "\"%s\" must be a boolean", key);
  *out = opts[key].get<bool>();
  return Status::ok();
}

std::string deltas_to_json(const std::vector<ChatDelta>& deltas) {
  Json arr = Json::array();
  for (const ChatDelta& d : deltas) {
    if (d.text.empty() &&
        (d.kind == ChatDelta::Kind::CONTENT || d.kind == ChatDelta::Kind::REASONING)) {
      continue;
    }
    arr.push_back(geist::chat::chat_delta_to_json(d));
  }
  return arr.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace

extern "C" {

geist_status geist_chat_parser_create(const geist_chat_template* tmpl, const char* prompt,
                                      size_t prompt_len, const char* options_json,
                                      size_t options_len, geist_chat_parser** out, char* err_buf,
                                      size_t err_cap) {
  if (out == nullptr || (prompt == nullptr && prompt_len > 0) ||
      (options_json == nullptr && options_len > 0)) {
    write_err(err_buf, err_cap, "out, prompt or options_json is NULL");
    return GEIST_E_INVALID_ARG;
  }
  *out = nullptr;
  return geist::api::guarded(
      [&]() -> Status {
        Json opts = Json::object();
        if (options_len > 0) {
          opts = Json::parse(options_json, options_json + options_len, nullptr, false);
          if (opts.is_discarded() || !opts.is_object()) {
            return Status(GEIST_E_INVALID_ARG, "options_json is not a JSON object");
          }
        }
        geist::chat::ParserOptions po;
        if (tmpl != nullptr)
          po.format = geist::chat::detect_chat_format(geist_chat_template_source(tmpl));
        if (opts.contains("tools") && !opts["tools"].is_null()) {
          if (!opts["tools"].is_array())
            return Status(GEIST_E_INVALID_ARG, "\"tools\" must be a list");
          po.tools = opts["tools"];
        }
        bool parse_tools = !po.tools.empty();
        bool parse_reasoning = true;
        GEIST_RETURN_IF_ERROR(read_bool(opts, "parse_tool_calls", &parse_tools));
        GEIST_RETURN_IF_ERROR(read_bool(opts, "parse_reasoning", &parse_reasoning));
        if (!parse_tools) po.format.tools = geist::chat::ToolCallFormat::NONE;
        if (!parse_reasoning) po.format.reasoning = false;
        po.starts_in_reasoning =
            po.format.reasoning && prompt_len > 0 &&
            geist::chat::prompt_opens_reasoning(std::string_view(prompt, prompt_len));
        std::vector<std::string> stops;
        if (opts.contains("stop")) GEIST_RETURN_IF_ERROR(read_stops(opts["stop"], &stops));
        std::unique_ptr<geist_chat_parser> p(new geist_chat_parser());
        if (!stops.empty()) p->stop.emplace(std::move(stops));
        p->parser = std::make_unique<geist::chat::ChatParser>(std::move(po));
        *out = p.release();
        return Status::ok();
      },
      [&](const std::string& msg) { write_err(err_buf, err_cap, msg); });
}

void geist_chat_parser_free(geist_chat_parser* parser) { delete parser; }

geist_status geist_chat_parser_feed(geist_chat_parser* parser, const char* text, size_t len,
                                    const char** out_json, int* out_stopped) {
  if (parser == nullptr || out_json == nullptr || (text == nullptr && len > 0)) {
    return GEIST_E_INVALID_ARG;
  }
  if (parser->finished) return GEIST_E_INVALID_STATE;
  return geist::api::guarded(
      [&]() -> Status {
        std::vector<ChatDelta> deltas;
        const std::string_view piece(text == nullptr ? "" : text, len);
        bool stopped = false;
        if (parser->stop) {
          if (!parser->stop->stopped()) {
            std::string safe;
            stopped = parser->stop->feed(piece, &safe);
            parser->parser->feed(safe, &deltas);
          } else {
            stopped = true;
          }
        } else {
          parser->parser->feed(piece, &deltas);
        }
        parser->deltas_json = deltas_to_json(deltas);
        *out_json = parser->deltas_json.c_str();
        if (out_stopped != nullptr) *out_stopped = stopped ? 1 : 0;
        return Status::ok();
      },
      [](const std::string&) {});
}

geist_status geist_chat_parser_finish(geist_chat_parser* parser, const char** out_deltas,
                                      const char** out_message) {
  if (parser == nullptr || out_deltas == nullptr || out_message == nullptr) {
    return GEIST_E_INVALID_ARG;
  }
  if (parser->finished) return GEIST_E_INVALID_STATE;
  return geist::api::guarded(
      [&]() -> Status {
        std::vector<ChatDelta> deltas;
        if (parser->stop && !parser->stop->stopped()) {
          std::string rest;
          parser->stop->finish(&rest);
          parser->parser->feed(rest, &deltas);
        }
        parser->parser->finish(&deltas);
        parser->finished = true;
        parser->deltas_json = deltas_to_json(deltas);
        parser->message_json = geist::chat::chat_msg_to_json(parser->parser->message())
                                   .dump(-1, ' ', false, Json::error_handler_t::replace);
        *out_deltas = parser->deltas_json.c_str();
        *out_message = parser->message_json.c_str();
        return Status::ok();
      },
      [](const std::string&) {});
}

}  // extern "C"
