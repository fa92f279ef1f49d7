// Helpers for the output-parser tests: feed a reply in given pieces, rebuild the message from
// the deltas, compare messages with arguments as JSON values.
#pragma once

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_parse.h"

namespace geist::chat::ptest {

struct StreamRun {
  ChatMsg final;        // parser.message() after finish
  ChatMsg from_deltas;  // the message the deltas add up to
  std::vector<ChatDelta> deltas;
};

inline StreamRun run_pieces(const std::vector<std::string>& pieces, const ParserOptions& opts) {
  StreamRun r;
  ChatParser parser(opts);
  for (const std::string& p : pieces) parser.feed(p, &r.deltas);
  parser.finish(&r.deltas);
  r.final = parser.message();
  for (const ChatDelta& d : r.deltas) {
    switch (d.kind) {
      case ChatDelta::Kind::CONTENT:
        r.from_deltas.content += d.text;
        break;
      case ChatDelta::Kind::REASONING:
        r.from_deltas.reasoning_content += d.text;
        break;
      case ChatDelta::Kind::TOOL_CALL_BEGIN:
        EXPECT_EQ(d.index, static_cast<int>(r.from_deltas.tool_calls.size()));
        r.from_deltas.tool_calls.push_back(ToolCall{d.id, d.name, ""});
        break;
      case ChatDelta::Kind::TOOL_CALL_ARGS:
        EXPECT_EQ(d.index + 1, static_cast<int>(r.from_deltas.tool_calls.size()));
        if (!r.from_deltas.tool_calls.empty()) r.from_deltas.tool_calls.back().arguments += d.text;
        break;
    }
  }
  return r;
}

inline std::vector<std::string> split_chars(std::string_view text) {
  std::vector<std::string> out;
  for (char c : text) out.emplace_back(1, c);
  return out;
}

inline std::vector<std::string> split_random(std::string_view text, std::mt19937* rng) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t n = std::min<size_t>(text.size() - pos, 1 + (*rng)() % 9);
    out.emplace_back(text.substr(pos, n));
    pos += n;
  }
  return out;
}

inline std::string describe(const ChatMsg& m) {
  std::string s = "content=" + nlohmann::json(m.content).dump() +
                  " reasoning=" + nlohmann::json(m.reasoning_content).dump() + " calls=[";
  for (const ToolCall& c : m.tool_calls) s += c.id + ":" + c.name + c.arguments + " ";
  return s + "]";
}

// Equal content, reasoning, and calls (id, name, arguments as JSON values).
inline bool same_msg(const ChatMsg& a, const ChatMsg& b, bool compare_ids = true) {
  if (a.content != b.content || a.reasoning_content != b.reasoning_content) return false;
  if (a.tool_calls.size() != b.tool_calls.size()) return false;
  for (size_t i = 0; i < a.tool_calls.size(); ++i) {
    const ToolCall &x = a.tool_calls[i], &y = b.tool_calls[i];
    if (x.name != y.name || (compare_ids && x.id != y.id)) return false;
    const Json jx = Json::parse(x.arguments, nullptr, false);
    const Json jy = Json::parse(y.arguments, nullptr, false);
    if (jx.is_discarded() || jy.is_discarded() || jx != jy) return false;
  }
  return true;
}

// Whole UTF-8 sequences only.
inline bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80             ? 1
               : (c & 0xE0) == 0xC0 ? 2
               : (c & 0xF0) == 0xE0 ? 3
               : (c & 0xF8) == 0xF0 ? 4
                                    : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

// Feeds `text` whole, char by char and in random pieces (several seeds); every run must give
// the one-shot result, and its deltas must add up to it. Returns the one-shot result.
inline ChatMsg check_split_invariance(std::string_view text, ParserOptions opts) {
  if (opts.id_seed == 0) opts.id_seed = 12345;
  const ChatMsg whole = parse_chat_output(text, opts);
  std::vector<std::vector<std::string>> splits = {{std::string(text)}, split_chars(text)};
  std::mt19937 rng(7);
  for (int i = 0; i < 8; ++i) splits.push_back(split_random(text, &rng));
  for (const auto& pieces : splits) {
    const StreamRun r = run_pieces(pieces, opts);
    EXPECT_TRUE(same_msg(r.final, whole))
        << "split into " << pieces.size() << ": " << describe(r.final) << " vs " << describe(whole);
    EXPECT_TRUE(same_msg(r.from_deltas, whole))
        << "deltas of " << pieces.size() << " pieces: " << describe(r.from_deltas) << " vs "
        << describe(whole);
    for (const ChatDelta& d : r.deltas) EXPECT_TRUE(valid_utf8(d.text)) << d.text;
  }
  return whole;
}

}  // namespace geist::chat::ptest
