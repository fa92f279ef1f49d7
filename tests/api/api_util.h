// Helpers for the C API tests: fixture JSON fields and a model handle that frees itself.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "geist/geist.h"
#include "geist/geist_snapshot.h"
#include "support/fixtures.h"
#include "support/json_fields.h"

namespace geist::test {

// The session's snapshot image (the size call, then the snapshot itself), failures reported.
inline std::vector<uint8_t> snapshot_of(geist_session* s) {
  size_t n = 0;
  EXPECT_EQ(geist_session_snapshot_size(s, &n), GEIST_OK) << geist_session_last_error(s);
  std::vector<uint8_t> img(n);
  size_t written = 0;
  EXPECT_EQ(geist_session_snapshot(s, img.data(), img.size(), &written), GEIST_OK)
      << geist_session_last_error(s);
  img.resize(written);
  return img;
}

// Prefills toks[from, to) in pieces of seeded random sizes (1 to 40 tokens).
inline void prefill_pieces(geist_session* s, const std::vector<int32_t>& toks, int32_t from,
                           int32_t to, std::mt19937* g) {
  for (int32_t p = from; p < to;) {
    const int32_t len = std::min<int32_t>(to - p, 1 + static_cast<int32_t>((*g)() % 40));
    ASSERT_EQ(geist_session_prefill(s, toks.data() + p, static_cast<size_t>(len)), GEIST_OK)
        << geist_session_last_error(s);
    p += len;
  }
}

// The string stored under "key" (no escapes other than none: the fixture prompts are plain).
inline std::string json_string(const std::string& json, const std::string& key) {
  const size_t k = json.find("\"" + key + "\"");
  if (k == std::string::npos) {
    ADD_FAILURE() << "key " << key << " not in JSON";
    return {};
  }
  const size_t colon = json.find(':', k);
  const size_t open = json.find('"', colon);
  const size_t close = json.find('"', open + 1);
  return json.substr(open + 1, close - open - 1);
}

struct Prompt1 {
  std::string prompt;
  std::vector<int32_t> prompt_tokens;  // llama.cpp's tokenization, BOS first
  std::vector<int32_t> greedy_tokens;  // llama.cpp's 64 greedy tokens after the prompt
  std::vector<float> logits;           // [95][512]: prompt rows, then one per generated token
};

inline Prompt1 load_prompt1() {
  Prompt1 p;
  const std::string dir = fixture_path("reference/stories260K/");
  const std::string json = read_text_file(dir + "prompt1.json");
  p.prompt = json_string(json, "prompt");
  p.prompt_tokens = json_int_array(json, "prompt_tokens");
  p.greedy_tokens = json_int_array(json, "greedy_tokens");
  p.logits = read_f32_file(dir + "prompt1.f32");
  return p;
}

// C API handles freed at scope exit. geist.hpp has classes of the same names in namespace
// geist: code that can share a unity unit with this header names those ::geist::ModelHandle.
struct ModelHandle {
  geist_model* m = nullptr;
  ModelHandle() = default;
  ModelHandle(const ModelHandle&) = delete;
  ModelHandle& operator=(const ModelHandle&) = delete;
  ~ModelHandle() { geist_model_free(m); }
};

struct SessionHandle {
  geist_session* s = nullptr;
  SessionHandle() = default;
  SessionHandle(const SessionHandle&) = delete;
  SessionHandle& operator=(const SessionHandle&) = delete;
  ~SessionHandle() { geist_session_destroy(s); }
};

inline std::string stories260k_path() { return fixture_path("models/stories260K.gguf"); }

// Loads the GGUF at path into *m (default parameters), failing the test with the loader's
// message.
inline void load_model(const std::string& path, ModelHandle* m) {
  char err[512] = "";
  ASSERT_EQ(geist_model_load(path.c_str(), nullptr, &m->m, err, sizeof err), GEIST_OK) << err;
}

}  // namespace geist::test
