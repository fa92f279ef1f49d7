// Property test against the oracle: random conversations (roles, multi-turn, unicode, quotes,
// backslashes, whitespace, content as text parts, tool calls with object arguments, tools with
// JSON-schema parameters, reasoning_content, enable_thinking, add_generation_prompt) rendered by
// Python Jinja2 through the fixtures' render_reference.py and by us: outputs must be equal, and
// where Jinja2 raised we must fail too.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>

#include "support/fixtures.h"
#include "support/jinja_oracle.h"
#include "test_jinja_util.h"

namespace geist::test {
namespace {

using jinja::Json;

class ConversationGen {
 public:
  explicit ConversationGen(uint32_t seed) : rng_(seed) {}

  Json make_case(int index) {
    Json c;
    c["name"] = "rand" + std::to_string(index);
    Json msgs = Json::array();
    if (coin(0.5)) msgs.push_back({{"role", "system"}, {"content", text()}});
    int turns = 1 + pick(3);
    bool with_tools = coin(0.4);
    for (int t = 0; t < turns; ++t) {
      msgs.push_back({{"role", "user"}, {"content", coin(0.2) ? parts() : Json(text())}});
      bool last = t == turns - 1;
      if (last && coin(0.6)) break;  // ends on the user: the generation prompt case
      Json a = {{"role", "assistant"}};
      if (coin(0.3)) a["reasoning_content"] = text();
      if (with_tools && coin(0.5)) {
        a["content"] = coin(0.5) ? Json(text()) : Json("");
        Json calls = Json::array();
        int n = 1 + pick(2);
        for (int k = 0; k < n; ++k)
          calls.push_back({{"id", "call" + std::to_string(k)},
                           {"type", "function"},
                           {"function", {{"name", tool_name()}, {"arguments", arguments()}}}});
        a["tool_calls"] = calls;
        msgs.push_back(a);
        for (int k = 0; k < n; ++k)
          msgs.push_back({{"role", "tool"},
                          {"tool_call_id", "call" + std::to_string(k)},
                          {"content", text()}});
        if (coin(0.7)) msgs.push_back({{"role", "assistant"}, {"content", text()}});
      } else {
        a["content"] = text();
        msgs.push_back(a);
      }
    }
    c["messages"] = msgs;
    if (with_tools) c["tools"] = tools();
    if (coin(0.7)) c["add_generation_prompt"] = coin(0.6);
    if (coin(0.6)) c["context"] = {{"enable_thinking", coin(0.5)}};
    return c;
  }

 private:
  std::mt19937 rng_;
  int pick(int n) { return int(rng_() % uint32_t(n)); }
  bool coin(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  std::string text() {
    static const char* frags[] = {"Hello",        "world",        " ",
                                  "  ",           "\n",           "\n\n",
                                  "\t",           "What is 2+2?", "日本語",
                                  "héllo",        "🙂",         "naïve café",
                                  "'quoted'",     "\"dq\"",       "back\\slash",
                                  "<think>",      "</think>",     "{{ x }}",
                                  "{% if %}",     "&amp;",        "a < b > c",
                                  "   padded   ", "ümlaut",       "Ω≈ç√",
                                  "tab\there",    "line1\nline2", "42",
                                  "-3.5",         "<tool_call>",  "json: {\"k\": [1, 2]}",
                                  "end.",         "Привет",       "\r\n"};
    int n = 1 + pick(4);
    std::string s;
    for (int k = 0; k < n; ++k) s += frags[pick(int(sizeof frags / sizeof *frags))];
    return s;
  }
  Json parts() {
    Json p = Json::array();
    int n = 1 + pick(2);
    for (int k = 0; k < n; ++k) p.push_back({{"type", "text"}, {"text", text()}});
    return p;
  }
  std::string tool_name() {
    static const char* names[] = {"get_weather", "search", "add", "lookup_user"};
    return names[pick(4)];
  }
  Json arguments() {
    Json a = Json::object();
    if (coin(0.8)) a["location"] = text();
    if (coin(0.5)) a["count"] = pick(100);
    if (coin(0.3)) a["ratio"] = 0.25 * pick(9);
    if (coin(0.3)) a["flags"] = {true, false, nullptr};
    if (coin(0.3)) a["nested"] = {{"q", text()}, {"list", {1, "two"}}};
    return a;
  }
  Json tools() {
    Json ts = Json::array();
    int n = 1 + pick(2);
    for (int k = 0; k < n; ++k) {
      Json props = {{"location", {{"type", "string"}, {"description", text()}}}};
      if (coin(0.5)) props["unit"] = {{"type", "string"}, {"enum", {"celsius", "fahrenheit"}}};
      if (coin(0.5)) props["count"] = {{"type", "integer"}, {"description", "How many"}};
      ts.push_back({{"type", "function"},
                    {"function",
                     {{"name", tool_name()},
                      {"description", text()},
                      {"parameters",
                       {{"type", "object"}, {"properties", props}, {"required", {"location"}}}}}}});
    }
    return ts;
  }
};

TEST(JinjaOracle, RandomConversationsMatchPythonJinja2) {
  GEIST_REQUIRE_FIXTURES();
  const std::string tdir = fixture_path("templates");
  ASSERT_EQ(std::system("/usr/bin/python3 -c 'import jinja2' 2>/dev/null"), 0)
      << "python3-jinja2 is missing: run scripts/install_deps.sh (the oracle test needs it)";
  const std::vector<std::string> names = {"Qwen3.5-4B",
                                          "Qwen-Qwen3-0.6B",
                                          "meta-llama-Llama-3.1-8B-Instruct",
                                          "HuggingFaceTB-SmolLM3-3B",
                                          "openai-gpt-oss-120b",
                                          "google-gemma-4-31B-it"};
  Json fixture_spec = Json::parse(slurp(tdir + "/cases.json"));
  Json spec;
  spec["special_tokens"] = fixture_spec["special_tokens"];
  spec["cases"] = Json::array();
  ConversationGen gen(20260115);
  const int n_cases = 40;
  for (int k = 0; k < n_cases; ++k) spec["cases"].push_back(gen.make_case(k));

  int compared = 0, matched = 0, errors = 0;
  for (const auto& name : names) {
    SCOPED_TRACE("template " + name);
    const std::string source = slurp(tdir + "/" + name + ".jinja");
    const std::map<std::string, OracleResult> oracle = render_with_jinja2(name, source, spec);
    std::unique_ptr<jinja::Template> t;
    Status st = jinja::Template::parse(source, jinja::Limits{}, &t);
    ASSERT_TRUE(st.is_ok()) << st.message();
    for (const auto& c : spec["cases"]) {
      const std::string cname = c["name"].get<std::string>();
      SCOPED_TRACE("case " + cname + ": " + c.dump());
      const auto it = oracle.find(cname);
      ASSERT_TRUE(it != oracle.end()) << "the oracle wrote nothing for " << cname;
      const bool want_err = !it->second.ok;
      ++compared;
      std::string got;
      Status r = t->render(case_context(spec, name, c), pinned_options(), &got);
      if (want_err) {
        ++errors;
        EXPECT_FALSE(r.is_ok()) << "Jinja2 raised " << it->second.text << "we rendered:\n" << got;
        if (!r.is_ok()) ++matched;
      } else {
        EXPECT_TRUE(r.is_ok()) << r.message();
        const std::string& want = it->second.text;
        EXPECT_EQ(got, want);
        if (r.is_ok() && got == want) ++matched;
      }
    }
  }
  std::printf("jinja oracle: %d of %d random renderings match Python Jinja2 (%d raised there)\n",
              matched, compared, errors);
  EXPECT_EQ(matched, compared);
}

}  // namespace
}  // namespace geist::test
