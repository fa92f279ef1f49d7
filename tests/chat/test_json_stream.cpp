// JsonStream against nlohmann::json as the reference: random values dumped with and without
// indentation, fed in random pieces, come out as nlohmann's compact dump byte for byte; after
// every piece what came out, closed by close_suffix(), is valid JSON; invalid text stops it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "chat/json_stream.h"

namespace geist::chat {
namespace {

using Json = nlohmann::ordered_json;

Json random_value(std::mt19937* rng, int depth) {
  const int kind = static_cast<int>((*rng)() % (depth > 3 ? 5 : 7));
  static const std::vector<std::string> words = {"",
                                                 "a",
                                                 "Oslo",
                                                 "with \"quotes\"",
                                                 "back\\slash",
                                                 "tab\tnew\nline",
                                                 "é日本🙂",
                                                 "\x01\x1f",
                                                 "</tool_call>",
                                                 "{not json}"};
  switch (kind) {
    case 0:
      return nullptr;
    case 1:
      return (*rng)() % 2 == 0;
    case 2:
      return static_cast<int64_t>((*rng)() % 2000000) - 1000000;
    case 3:
      return static_cast<double>((*rng)() % 100000) / 64.0 - 700.0;
    case 4:
      return words[(*rng)() % words.size()];
    case 5: {
      Json a = Json::array();
      const int n = static_cast<int>((*rng)() % 4);
      for (int i = 0; i < n; ++i) a.push_back(random_value(rng, depth + 1));
      return a;
    }
    default: {
      Json o = Json::object();
      const int n = static_cast<int>((*rng)() % 4);
      for (int i = 0; i < n; ++i) o[words[(*rng)() % words.size()]] = random_value(rng, depth + 1);
      return o;
    }
  }
}

// Feeds text in the given pieces; checks the prefix property after each; returns the output.
std::string stream(const std::vector<std::string>& pieces, JsonStream::Result* last) {
  JsonStream js(true);
  std::string out;
  *last = JsonStream::Result::MORE;
  for (const std::string& p : pieces) {
    size_t used = 0;
    *last = js.feed(p, &used, &out);
    const std::string closed = out + js.close_suffix();
    EXPECT_TRUE(Json::accept(closed)) << closed;
    if (*last != JsonStream::Result::MORE) break;
    EXPECT_EQ(used, p.size());
  }
  if (*last == JsonStream::Result::MORE) js.finish(&out);
  return out;
}

std::vector<std::string> random_pieces(const std::string& text, std::mt19937* rng) {
  std::vector<std::string> out;
  for (size_t pos = 0; pos < text.size();) {
    const size_t n = std::min<size_t>(text.size() - pos, 1 + (*rng)() % 7);
    out.push_back(text.substr(pos, n));
    pos += n;
  }
  return out;
}

TEST(JsonStream, RandomObjectsComeOutCompact) {
  std::mt19937 rng(2024);
  for (int iter = 0; iter < 400; ++iter) {
    Json v = random_value(&rng, 0);
    if (!v.is_object()) v = Json{{"v", v}};
    const std::string compact = v.dump();
    for (int indent : {-1, 0, 2}) {
      const std::string text = v.dump(indent);
      JsonStream::Result r;
      const std::string out = stream(random_pieces(text, &rng), &r);
      EXPECT_EQ(r, JsonStream::Result::DONE) << text;
      EXPECT_EQ(out, compact) << text;
    }
  }
}

TEST(JsonStream, StopsAtTheEndOfTheValue) {
  JsonStream js(true);
  std::string out;
  size_t used = 0;
  EXPECT_EQ(js.feed(" {\"a\": [1, 2]}\n</tool_call>", &used, &out), JsonStream::Result::DONE);
  EXPECT_EQ(used, 14u);
  EXPECT_EQ(out, R"({"a":[1,2]})");
  EXPECT_TRUE(js.done());
  EXPECT_EQ(js.close_suffix(), "");
}

TEST(JsonStream, TruncatedValuesClose) {
  // Each prefix of a value, closed, is valid JSON; the closed text keeps every decided token.
  const std::string text =
      R"({"s": "a\"b\u00e9\ud83d\ude00c", "n": -12.5e+3, "l": [true, false, null], "o": {}})";
  // Escapes and numbers as written (nlohmann's dump would normalise them).
  const std::string compact =
      R"({"s":"a\"b\u00e9\ud83d\ude00c","n":-12.5e+3,"l":[true,false,null],"o":{}})";
  for (size_t cut = 1; cut < text.size(); ++cut) {
    JsonStream js(true);
    std::string out;
    size_t used = 0;
    const JsonStream::Result r = js.feed(std::string_view(text).substr(0, cut), &used, &out);
    ASSERT_EQ(r, JsonStream::Result::MORE) << cut;
    js.finish(&out);
    const std::string closed = out + js.close_suffix();
    EXPECT_TRUE(Json::accept(closed)) << closed;
    EXPECT_EQ(compact.compare(0, out.size(), out), 0) << out;
  }
}

TEST(JsonStream, InvalidTextStops) {
  const std::vector<std::string> bad = {R"({"a":})",
                                        R"({"a" 1})",
                                        R"({,})",
                                        R"([1])",
                                        R"({"a": 01})",
                                        R"({"a": tru e})",
                                        "{\"a\": \"\x01\"}",
                                        R"({"a": "\udc00"})",
                                        R"({"a": "\ud83dx"})",
                                        R"({"a": 1,})",
                                        R"({"a": [1,]})",
                                        R"({"a": "\q"})",
                                        R"({"a": 1.})",
                                        R"({"a": -})",
                                        "{\"a\": \"\xff\"}",
                                        R"({"a": 1]})",
                                        R"("str")",
                                        R"(x)"};
  for (const std::string& text : bad) {
    JsonStream js(true);
    std::string out;
    size_t used = 0;
    JsonStream::Result r = js.feed(text, &used, &out);
    if (r == JsonStream::Result::MORE) {
      js.finish(&out);
      EXPECT_FALSE(js.done()) << text;
    } else {
      EXPECT_EQ(r, JsonStream::Result::ERROR) << text;
      EXPECT_LT(used, text.size()) << text;
    }
    if (text[0] != '{') {  // not an object: refused at its first byte, nothing out
      EXPECT_EQ(used, 0u) << text;
      EXPECT_EQ(out, "") << text;
    } else {
      EXPECT_TRUE(Json::accept(out + js.close_suffix())) << text << " -> " << out;
    }
  }
}

TEST(JsonStream, DepthIsBounded) {
  std::string text;
  for (size_t i = 0; i < JsonStream::kMaxDepth + 10; ++i) text += "{\"a\":";
  JsonStream js(true);
  std::string out;
  size_t used = 0;
  EXPECT_EQ(js.feed(text, &used, &out), JsonStream::Result::ERROR);
  EXPECT_TRUE(Json::accept(out + js.close_suffix()));
}

TEST(JsonStream, ObjectTail) {
  JsonStream js = JsonStream::object_tail();
  std::string out;
  size_t used = 0;
  EXPECT_EQ(js.feed(", \"id\": \"x\"}\nrest", &used, &out), JsonStream::Result::DONE);
  EXPECT_EQ(used, 12u);
  JsonStream bad = JsonStream::object_tail();
  EXPECT_EQ(bad.feed(" x", &used, &out), JsonStream::Result::ERROR);
  EXPECT_EQ(bad.held(), " ");
}

}  // namespace
}  // namespace geist::chat
