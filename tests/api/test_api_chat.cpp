// The chat C ABI (geist_chat.h): rendering OpenAI-shaped requests through chat templates.
// Expected renderings come from Python Jinja2 with Hugging Face's settings: the fixtures'
// templates/expected/ files, or render_reference.py run on the conversation as the template
// expects it (tests/support/jinja_oracle.h) where geist adjusts what a client sends.
#include <gtest/gtest.h>

#include <string>

#include "geist/geist.h"
#include "geist/geist_chat.h"
#include "support/fixtures.h"
#include "support/jinja_oracle.h"

namespace geist::test {
namespace {

using Json = nlohmann::ordered_json;

Json cases_json() { return Json::parse(read_text_file(fixture_path("templates/cases.json"))); }

Json fixture_case(const std::string& name) {
  const Json all = cases_json();
  for (const Json& c : all["cases"]) {
    if (c["name"] == name) return c;
  }
  ADD_FAILURE() << "no case " << name;
  return Json::object();
}

struct Tmpl {
  geist_chat_template* t = nullptr;
  ~Tmpl() { geist_chat_template_free(t); }
};

// A template from the fixtures with that template's special tokens (cases.json).
void load_fixture_template(const std::string& name, Tmpl* out) {
  const Json spec = cases_json()["special_tokens"];
  const Json toks = spec.contains(name) ? spec[name] : spec["default"];
  const std::string src = read_text_file(fixture_path("templates/" + name + ".jinja"));
  char err[512] = {};
  ASSERT_EQ(geist_chat_template_create(
                src.data(), src.size(), toks["bos_token"].get<std::string>().c_str(),
                toks["eos_token"].get<std::string>().c_str(), &out->t, err, sizeof err),
            GEIST_OK)
      << err;
}

Json request_of(const Json& c) {
  Json r = {{"messages", c["messages"]}, {"now", "2026-01-15T09:30:00"}};
  if (c.contains("tools")) r["tools"] = c["tools"];
  if (c.contains("add_generation_prompt")) r["add_generation_prompt"] = c["add_generation_prompt"];
  if (c.contains("context")) r["chat_template_kwargs"] = c["context"];
  return r;
}

geist_status render(geist_chat_template* t, const Json& req, std::string* out) {
  const std::string body = req.dump();
  size_t n = 0;
  geist_status st = geist_chat_render(t, body.data(), body.size(), nullptr, 0, &n);
  if (st != GEIST_E_INVALID_ARG || n == 0) return st;
  out->assign(n, '\0');
  return geist_chat_render(t, body.data(), body.size(), out->data(), out->size(), &n);
}

// The oracle's rendering of one case (with the template's own special tokens).
OracleResult oracle(const std::string& name, const Json& c) {
  Json one = cases_json();
  one["cases"] = Json::array({c});
  auto r =
      render_with_jinja2(name, read_text_file(fixture_path("templates/" + name + ".jinja")), one);
  return r[c["name"].get<std::string>()];
}

TEST(ApiChat, RendersFixtureCasesAsJinja2) {
  GEIST_REQUIRE_FIXTURES();
  Tmpl t;
  load_fixture_template("Qwen3.5-4B", &t);
  for (const char* name : {"tools", "tool_call_roundtrip", "thinking_off", "multi_turn"}) {
    SCOPED_TRACE(name);
    std::string text;
    ASSERT_EQ(render(t.t, request_of(fixture_case(name)), &text), GEIST_OK)
        << geist_chat_template_last_error(t.t);
    EXPECT_EQ(text, read_text_file(fixture_path(std::string("templates/expected/Qwen3.5-4B/") +
                                                name + ".txt")));
  }
}

TEST(ApiChat, StringToolArgumentsBecomeObjects) {
  GEIST_REQUIRE_FIXTURES();
  // Raw, the Qwen3.5 template raises on string arguments (the fixture's .err); through the API
  // it renders what Jinja2 renders for the same conversation with object arguments.
  Json c = fixture_case("tool_call_string_arguments");
  Json as_objects = c;
  for (Json& m : as_objects["messages"]) {
    if (!m.contains("tool_calls")) continue;
    for (Json& call : m["tool_calls"]) {
      call["function"]["arguments"] = Json::parse(call["function"]["arguments"].get<std::string>());
    }
  }
  // Qwen3's template also raises on the turn's null content ('<think>' in None), so geist
  // gives it "" there: its reference is rendered with "" too.
  Json as_strings = as_objects;
  for (Json& m : as_strings["messages"]) {
    if (m["content"].is_null()) m["content"] = "";
  }
  for (const char* name : {"Qwen3.5-4B", "Qwen-Qwen3-0.6B", "meta-llama-Llama-3.1-8B-Instruct"}) {
    SCOPED_TRACE(name);
    const bool qwen3 = std::string(name) == "Qwen-Qwen3-0.6B";
    const OracleResult want = oracle(name, qwen3 ? as_strings : as_objects);
    ASSERT_TRUE(want.ok) << want.text;
    Tmpl t;
    load_fixture_template(name, &t);
    std::string text;
    ASSERT_EQ(render(t.t, request_of(c), &text), GEIST_OK) << geist_chat_template_last_error(t.t);
    EXPECT_EQ(text, want.text);
  }
}

TEST(ApiChat, DeveloperRoleIsSystem) {
  GEIST_REQUIRE_FIXTURES();
  Json c = fixture_case("system");
  for (Json& m : c["messages"]) {
    if (m["role"] == "system") m["role"] = "developer";
  }
  Tmpl t;
  load_fixture_template("Qwen-Qwen3-0.6B", &t);
  std::string text;
  ASSERT_EQ(render(t.t, request_of(c), &text), GEIST_OK) << geist_chat_template_last_error(t.t);
  EXPECT_EQ(text, read_text_file(fixture_path("templates/expected/Qwen-Qwen3-0.6B/system.txt")));
}

TEST(ApiChat, ContentPartsJoinedForTemplatesThatPrintStrings) {
  GEIST_REQUIRE_FIXTURES();
  const Json c = fixture_case("content_parts");
  // Qwen3.5 iterates content parts itself: the list goes through as sent.
  {
    Tmpl t;
    load_fixture_template("Qwen3.5-4B", &t);
    std::string text;
    ASSERT_EQ(render(t.t, request_of(c), &text), GEIST_OK) << geist_chat_template_last_error(t.t);
    EXPECT_EQ(text,
              read_text_file(fixture_path("templates/expected/Qwen3.5-4B/content_parts.txt")));
  }
  // Llama 3.1's template prints content: the parts' texts joined by "\n" (as vLLM does).
  Json joined = c;
  for (Json& m : joined["messages"]) {
    if (!m["content"].is_array()) continue;
    std::string s;
    for (const Json& p : m["content"]) {
      if (!s.empty()) s.append("\n");
      s.append(p["text"].get<std::string>());
    }
    m["content"] = s;
  }
  const std::string name = "meta-llama-Llama-3.1-8B-Instruct";
  const OracleResult want = oracle(name, joined);
  ASSERT_TRUE(want.ok) << want.text;
  Tmpl t;
  load_fixture_template(name, &t);
  std::string text;
  ASSERT_EQ(render(t.t, request_of(c), &text), GEIST_OK) << geist_chat_template_last_error(t.t);
  EXPECT_EQ(text, want.text);
}

TEST(ApiChat, ErrorsNameTheProblem) {
  GEIST_REQUIRE_FIXTURES();
  Tmpl t;
  load_fixture_template("Qwen3.5-4B", &t);
  std::string text;
  const auto render_text = [&](const std::string& body) {
    size_t n = 0;
    char buf[4096];
    return geist_chat_render(t.t, body.data(), body.size(), buf, sizeof buf, &n);
  };
  EXPECT_EQ(render_text("{\"messages\": ["), GEIST_E_INVALID_ARG);
  EXPECT_NE(std::string(geist_chat_template_last_error(t.t)).find("JSON"), std::string::npos);
  EXPECT_EQ(render_text("{\"messages\": 3}"), GEIST_E_INVALID_ARG);
  EXPECT_NE(std::string(geist_chat_template_last_error(t.t)).find("messages"), std::string::npos);
  EXPECT_EQ(render_text("{\"messages\": [{\"content\": \"x\"}]}"), GEIST_E_INVALID_ARG);
  EXPECT_NE(std::string(geist_chat_template_last_error(t.t)).find("role"), std::string::npos);
  EXPECT_EQ(render_text("{\"messages\": [], \"now\": \"yesterday\"}"), GEIST_E_INVALID_ARG);
  // The template's own raise_exception message (fixture .err).
  EXPECT_EQ(render(t.t, request_of(fixture_case("bad_role_order")), &text), GEIST_E_FORMAT);
  std::string want =
      read_text_file(fixture_path("templates/expected/Qwen3.5-4B/bad_role_order.err"));
  want = want.substr(want.find(": ") + 2);
  while (!want.empty() && want.back() == '\n') want.pop_back();
  EXPECT_NE(std::string(geist_chat_template_last_error(t.t)).find(want), std::string::npos)
      << geist_chat_template_last_error(t.t);
  // A template that does not parse is refused with where.
  geist_chat_template* bad = nullptr;
  char err[256] = {};
  EXPECT_EQ(geist_chat_template_create("{% if %}", 8, "", "", &bad, err, sizeof err),
            GEIST_E_FORMAT);
  EXPECT_EQ(bad, nullptr);
  EXPECT_NE(std::string(err).find("line 1"), std::string::npos) << err;
}

TEST(ApiChat, ModelWithoutTemplateGetsChatml) {
  GEIST_REQUIRE_FIXTURES();
  geist_model* m = nullptr;
  char err[512] = {};
  ASSERT_EQ(geist_model_load(fixture_path("models/stories260K.gguf").c_str(), nullptr, &m, err,
                             sizeof err),
            GEIST_OK)
      << err;
  geist_chat_template* t = nullptr;
  int fallback = 0;
  ASSERT_EQ(geist_chat_template_from_model(m, nullptr, &t, &fallback, err, sizeof err), GEIST_OK)
      << err;
  EXPECT_EQ(fallback, 1);
  EXPECT_NE(std::string(geist_chat_template_source(t)).find("<|im_start|>"), std::string::npos);
  geist_chat_template* named = nullptr;
  EXPECT_EQ(geist_chat_template_from_model(m, "tool_use", &named, nullptr, err, sizeof err),
            GEIST_E_NOT_FOUND);
  EXPECT_NE(std::string(err).find("tool_use"), std::string::npos) << err;
  geist_chat_template_free(t);
  geist_model_free(m);
}

// Feeds text one byte at a time; returns the concatenated deltas as (content, reasoning) and
// the final message.
struct Parsed {
  std::string content, reasoning;
  Json message;
  bool stopped = false;
  int n_tool_calls = 0;
};

Parsed parse_bytes(geist_chat_template* t, const std::string& prompt, const std::string& options,
                   const std::string& reply) {
  geist_chat_parser* p = nullptr;
  char err[256] = {};
  Parsed out;
  EXPECT_EQ(geist_chat_parser_create(t, prompt.data(), prompt.size(), options.data(),
                                     options.size(), &p, err, sizeof err),
            GEIST_OK)
      << err;
  if (p == nullptr) return out;
  const auto take = [&](const char* json) {
    for (const Json& d : Json::parse(json)) {
      if (d.contains("content")) out.content += d["content"].get<std::string>();
      if (d.contains("reasoning_content"))
        out.reasoning += d["reasoning_content"].get<std::string>();
      if (d.contains("tool_calls") && d["tool_calls"][0]["function"].contains("name")) {
        ++out.n_tool_calls;
      }
    }
  };
  for (char c : reply) {
    const char* json = nullptr;
    int stopped = 0;
    EXPECT_EQ(geist_chat_parser_feed(p, &c, 1, &json, &stopped), GEIST_OK);
    take(json);
    if (stopped) {
      out.stopped = true;
      break;
    }
  }
  const char* deltas = nullptr;
  const char* message = nullptr;
  EXPECT_EQ(geist_chat_parser_finish(p, &deltas, &message), GEIST_OK);
  take(deltas);
  out.message = Json::parse(message);
  const char* again = nullptr;
  EXPECT_EQ(geist_chat_parser_finish(p, &deltas, &again), GEIST_E_INVALID_STATE);
  geist_chat_parser_free(p);
  return out;
}

TEST(ApiChatParser, StopStringSpanningPiecesIsNeverEmitted) {
  const Parsed r =
      parse_bytes(nullptr, "", R"({"stop": ["<END>", "zzz"]})", "Hello <EN world <END> gone");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.content, "Hello <EN world ");
  EXPECT_EQ(r.message["content"], "Hello <EN world ");
  const Parsed none = parse_bytes(nullptr, "", "", "plain <think>text</think>");
  EXPECT_EQ(none.content, "plain <think>text</think>");
  EXPECT_FALSE(none.stopped);
}

TEST(ApiChatParser, QwenReasoningAndToolCall) {
  GEIST_REQUIRE_FIXTURES();
  Tmpl t;
  load_fixture_template("Qwen3.5-4B", &t);
  // The prompt Qwen3.5 renders opens the think block (fixture thinking_on).
  const std::string prompt =
      read_text_file(fixture_path("templates/expected/Qwen3.5-4B/thinking_on.txt"));
  const Json tools = fixture_case("tools")["tools"];
  const std::string options = Json({{"tools", tools}}).dump();
  // The tool-call layout the template itself renders for an assistant turn (fixture
  // tool_call_roundtrip): <tool_call>\n<function=NAME>\n<parameter=P>\nV\n</parameter>...
  const std::string reply =
      "Oslo weather needed.\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter="
      "location>\nOslo\n</parameter>\n</function>\n</tool_call>";
  const Parsed r = parse_bytes(t.t, prompt, options, reply);
  EXPECT_EQ(r.reasoning, "Oslo weather needed.");
  EXPECT_EQ(r.message["reasoning_content"], "Oslo weather needed.");
  ASSERT_TRUE(r.message.contains("tool_calls")) << r.message.dump();
  ASSERT_EQ(r.message["tool_calls"].size(), 1u);
  EXPECT_EQ(r.n_tool_calls, 1);
  const Json& fn = r.message["tool_calls"][0]["function"];
  EXPECT_EQ(fn["name"], "get_weather");
  EXPECT_EQ(Json::parse(fn["arguments"].get<std::string>()), Json({{"location", "Oslo"}}));
  EXPECT_TRUE(r.message["content"].is_null()) << r.message.dump();
  // Without tools in the request the same text is content, not a call.
  const Parsed plain = parse_bytes(t.t, prompt, "", reply);
  EXPECT_FALSE(plain.message.contains("tool_calls"));
  EXPECT_NE(plain.content.find("<tool_call>"), std::string::npos);
}

TEST(ApiChatParser, BadOptionsAreRefused) {
  geist_chat_parser* p = nullptr;
  char err[256] = {};
  const std::string bad = R"({"stop": 5})";
  EXPECT_EQ(
      geist_chat_parser_create(nullptr, nullptr, 0, bad.data(), bad.size(), &p, err, sizeof err),
      GEIST_E_INVALID_ARG);
  EXPECT_EQ(p, nullptr);
  EXPECT_NE(std::string(err).find("stop"), std::string::npos) << err;
  const std::string not_json = "{";
  EXPECT_EQ(geist_chat_parser_create(nullptr, nullptr, 0, not_json.data(), not_json.size(), &p, err,
                                     sizeof err),
            GEIST_E_INVALID_ARG);
}

}  // namespace
}  // namespace geist::test
